"""Typed data: the records a log parses into, and the job model built from them."""
