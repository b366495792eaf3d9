"""PyPTO's ``pypto.experimental`` names that exist here."""

from pypto.options import get_operation_options, set_operation_options

__all__ = ["get_operation_options", "set_operation_options"]
