"""Non-code resources: stylesheet and icons."""
