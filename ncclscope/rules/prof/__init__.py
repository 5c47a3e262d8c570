"""Rules about profiler plugin traces."""
