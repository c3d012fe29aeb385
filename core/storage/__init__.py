"""The store's repositories: each owns the SQL of one concern and shares a :class:`~memlens.storage.context.StoreContext`.

:class:`memlens.store.MemoryStore` is the facade over them; lifecycle services (sweep, consolidation, explain,
maintenance) use these modules, never the facade's private members.
"""
