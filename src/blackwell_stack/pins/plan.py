"""The pins section of `blackwell-stack plan`."""

from blackwell_stack.plan_model import PlanSection


def plan_section() -> PlanSection:
    return PlanSection(key="pins", title="Pinned inputs")
