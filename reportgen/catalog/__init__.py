"""The catalog: one columnar table (Parquet) of every stored run's summary, beside the bundles.

It makes listing, history and the site's index independent of the store's size: a reader lists the bundles
(no reads) and decodes only what it shows. Built from the bundles when missing, updated by each write.

- :mod:`~reportgen.catalog.table`: the Parquet parts, their two tables and schema version;
- :mod:`~reportgen.catalog.sync`: ``record`` (a write adds a part), ``sync`` (readers: catch up, compact), ``Catalog``.
"""

from reportgen.catalog.sync import Catalog, catalog_folder, record, sync

__all__ = ["Catalog", "catalog_folder", "record", "sync"]
