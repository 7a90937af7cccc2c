"""Module state: the attributes a model changes while running (ptlite's)."""

DECLARATIONS = r"""
ptlite::module_state() -> Any(a)  @structural
ptlite::get_attr(Any(a) state, str name, Any initial) -> Any(a)
ptlite::set_attr(Any(a!) state, str name, Any value) -> ()
"""
