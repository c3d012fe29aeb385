"""The PostgreSQL backend: a memlens store shared by a team's agents on many machines (see :mod:`memlens.postgres.connection`)."""
