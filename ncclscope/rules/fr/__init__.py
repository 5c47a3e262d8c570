"""Rules about PyTorch Flight Recorder dumps."""
