"""The SGLang service section of `blackwell-stack plan`."""

from blackwell_stack.plan_model import PlanSection


def plan_section() -> PlanSection:
    # Placeholder until the serve commands land.
    return PlanSection(key="service", title="SGLang service")
