"""What a server hides, as typed events: the kinds, their severity, the evidence and the advice
(events.py), and the neutral signals a backend reads out of its server's log (signals.py)."""
