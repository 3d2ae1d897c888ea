"""The sgl-kernel for SM120 section of `blackwell-stack plan`."""

from blackwell_stack.plan_model import PlanSection


def plan_section() -> PlanSection:
    # Placeholder until the kernel commands land.
    return PlanSection(key="kernel", title="sgl-kernel for SM120")
