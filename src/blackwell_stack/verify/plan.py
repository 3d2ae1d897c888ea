"""The Serving verification section of `blackwell-stack plan`."""

from blackwell_stack.plan_model import PlanSection


def plan_section() -> PlanSection:
    # Placeholder until the verify commands land.
    return PlanSection(key="verify", title="Serving verification")
