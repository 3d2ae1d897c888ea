"""The build record in the wheel, the build conditions it does not name, and the reference wheel."""

__all__ = ["reference"]
