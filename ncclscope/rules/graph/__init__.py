"""Rules about graph dumps (NCCL_GRAPH_DUMP_FILE)."""
