"""pins: every pin in one list (flake inputs, the stacks' locks, the wheels a stack keeps, kernel sources), and
the commands that update, rescue and vendor them. A pins file itself is data/pins.py."""
