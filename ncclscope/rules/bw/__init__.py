"""Rules about measured bandwidth."""
