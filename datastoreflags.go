package main

import (
	"github.com/spf13/pflag"

	"skiff/server"
)

// addDatastoreFlags are the server's state-store flags, k3s's names:
// the embedded Raft cluster (--cluster-init, --server, --cluster-reset,
// --raft-port) or an external etcd (--datastore-*).
func addDatastoreFlags(f *pflag.FlagSet, cfg *server.DatastoreConfig) {
	f.BoolVar(&cfg.ClusterInit, "cluster-init", false, "start a new HA cluster on the embedded Raft store (this server is its first member; an existing single-server database becomes its initial state)")
	f.StringVar(&cfg.JoinURL, "server", "", "join the HA cluster of this server (https://host:6443) as a member of its Raft store; needs the server token (--token)")
	f.BoolVar(&cfg.ClusterReset, "cluster-reset", false, "make this server's Raft data a new one-member cluster holding every write it has (quorum-loss recovery), then exit")
	f.IntVar(&cfg.RaftPort, "raft-port", 2380, "port of the Raft transport between servers (mutual TLS from the cluster CA)")
	f.StringVar(&cfg.Endpoint, "datastore-endpoint", "", "keep the state in this external etcd v3 cluster (https://h1:2379,https://h2:2379) instead of the embedded store")
	f.StringVar(&cfg.CAFile, "datastore-cafile", "", "CA bundle verifying the etcd members")
	f.StringVar(&cfg.CertFile, "datastore-certfile", "", "client certificate presented to etcd")
	f.StringVar(&cfg.KeyFile, "datastore-keyfile", "", "key of --datastore-certfile")
}
