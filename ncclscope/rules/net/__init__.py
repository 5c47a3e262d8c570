"""Rules about the network between nodes: sockets instead of RDMA, IB devices, net plugins, interfaces."""
