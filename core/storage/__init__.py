"""The store's repositories: each owns the SQL of one concern and shares a :class:`~memlens.storage.context.StoreContext`.

=================  ==============================================================================================
``context``        the connection, the lock, read and write transactions, settings, the audit append
``memories``       remembering, reading, version chains, relations, recall, edits, review flags
``search``         listings, counts and ranked search (with ``filters``: one filter for all of them)
``forgetting``     erasing memories and the tombstones they leave
``sessions``       agent sessions, and a tool call rendered as an observation
``audit``          reading and verifying the hash-chained audit log
``vectors``        stored embedding vectors
``transfer``       import and export
``rows``           rows to Memory/Session/Relation objects, by column name
``validation``     checking what callers pass
``results``        the values the store answers with
=================  ==============================================================================================

:class:`memlens.store.MemoryStore` is the facade over them; lifecycle services (sweep, consolidation, explain,
maintenance) use these modules and the store's repository attributes, never the facade's private members.
"""
