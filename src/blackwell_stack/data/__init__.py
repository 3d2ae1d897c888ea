"""data: the project's data files and the nouns read from them, shared by every area: a stack (stack.py) and its lock (lock.py, the file each
installer picks: wheel_choice.py), a serving profile and its runtime (profile.py), versions as the rules order
them (versions.py), pins (pins.py), plan items (plan.py), and the data registry (registry.py): every data file's
path, schema and loader."""
