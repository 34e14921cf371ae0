"""Prometheus both ways: the exporter of what the app samples, and a reader of a Prometheus server's HTTP API."""
