"""The areas the command line is made of, listed statically: each one's commands and its part of `plan`.

Every area has the same two entry points, typed here so that the type checker
follows them from the command line into the area:

    register(subparsers)       adds the area's commands (each sets `func(args) -> int`)
    plan_section(stacks)       its section of `plan` for the stacks shown (already resolved), if any
    plan_section(stack, key)   or, in an area with one section per stack, that stack's under `key`

COMMANDS is in the order `--help` lists them (after `plan`, the command line's
own); PLAN_SECTIONS in the order `plan` prints them, a section per stack with its
key's first word (cli/plan.py makes the keys).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from blackwell_stack.data.plan import PlanSection
from blackwell_stack.data.stack import Stack
from blackwell_stack.doctor import commands as doctor_commands
from blackwell_stack.doctor import plan as doctor_plan
from blackwell_stack.kernel import commands as kernel_commands
from blackwell_stack.kernel import plan as kernel_plan
from blackwell_stack.pins import commands as pins_commands
from blackwell_stack.pins import plan as pins_plan
from blackwell_stack.serve import commands as serve_commands
from blackwell_stack.serve import plan as serve_plan
from blackwell_stack.stacks import commands as stacks_commands
from blackwell_stack.stacks import plan as stacks_plan
from blackwell_stack.verify import commands as verify_commands
from blackwell_stack.verify import plan as verify_plan

Register = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
Shared = Callable[[list[Stack]], PlanSection | None]
PerStack = Callable[[Stack, str], PlanSection]

COMMANDS: tuple[Register, ...] = (
    stacks_commands.register,  # stack lock|audit|doctor
    pins_commands.register,  # pins show|update|rescue|vendor
    kernel_commands.register,  # kernel patches|build|sources|test|reference
    serve_commands.register,  # serve render|check|run|flags
    doctor_commands.register,  # inspect, doctor (and doctor abi), wheel diff
    verify_commands.register,  # smoke, bench
)

PLAN_SECTIONS: tuple[Shared | tuple[str, PerStack], ...] = (
    pins_plan.plan_section,  # what every stack builds on
    ("stack", stacks_plan.plan_section),  # each stack's own
    kernel_plan.plan_section,  # the source build, when a stack shown has one
    ("service", serve_plan.plan_section),  # the service of each stack
    ("doctor", doctor_plan.plan_section),  # what doctor checks on the host, per stack
    verify_plan.plan_section,  # smoke and bench
)
