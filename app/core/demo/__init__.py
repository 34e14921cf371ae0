"""The scripted demo and the pre-flight: pure data and rules."""
