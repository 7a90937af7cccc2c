"""Module state: the attributes a model changes while running (ptlite's)."""

MODULE_STATE = "ptlite::module_state"
GET_ATTR = "ptlite::get_attr"
SET_ATTR = "ptlite::set_attr"

DECLARATIONS = r"""
ptlite::module_state() -> Any(a)  @structural
ptlite::get_attr(Any(a) state, str name, Any initial) -> Any(a)
ptlite::set_attr(Any(a!) state, str name, Any value) -> ()
"""
