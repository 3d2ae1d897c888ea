"""The Host checks (doctor) section of `blackwell-stack plan`."""

from blackwell_stack.plan_model import PlanSection


def plan_section() -> PlanSection:
    # Placeholder until the doctor commands land.
    return PlanSection(key="doctor", title="Host checks (doctor)")
