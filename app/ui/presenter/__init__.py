"""The presenter mode: the big view, the demo director and the pre-flight."""
