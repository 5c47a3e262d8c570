"""Rules about NVLink SHARP and multi-node NVLink."""
