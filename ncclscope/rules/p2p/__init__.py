"""Rules about peer-to-peer transport between GPUs of one node."""
