"""What a run does to and reads of the cluster over the port: Events, owners, patches and their retries, the state
ConfigMap and its guard, pods, mig-manager, what a resumed run may trust, the part of a plan one run takes."""
