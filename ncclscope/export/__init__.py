"""The Parquet dataset: ``ncclscope export`` / ``ncclscope bulk`` write it, ``ncclscope.load`` reads
it. Schemas in ``schemas``, one job's export in ``writer``, many jobs in ``bulk``."""
