"""Sizing (notebooks 00 and 03, ``pt2aws recommend``): the catalog, prices, the workload, its
memory and parallelism, training and serving cost (:mod:`.serving_cost`), the tables."""
