// Package raft replicates skiff's state store with hashicorp/raft: every
// write is a command in the Raft log, and each member's FSM applies the
// committed log to a local SQLite replica (store/sqlite in Replica mode),
// so every member holds the same revisions. *Store implements store.Store.
//
// Writes on a follower are forwarded to the leader over the raft port and
// return once committed and applied locally; Get, List at the current
// revision and CurrentRevision are linearizable (a read index from the
// leader, then a wait for the local replica to reach it); List at a
// revision, continued pages and Watch are served by the local replica.
//
// Data layout under Config.Dir: raft.db (raft-boltdb: log and stable
// store), snapshots/ (raft's FileSnapshotStore; a snapshot is a copy of the
// replica), state.db (the replica).
package raft

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config says where a member keeps its data, who it is and how it talks to
// the other members.
type Config struct {
	// Dir holds raft.db, snapshots/ and state.db: <data-dir>/server/db/raft.
	Dir string
	// ID is the member ID (the server's node name); stable across restarts.
	ID string
	// BindAddr is the host:port the transport listens on (default
	// ":2380").
	BindAddr string
	// AdvertiseAddr is the host:port the other members dial; it may be
	// empty when BindAddr names a specific IP. Member certificates must
	// carry its host as a SAN.
	AdvertiseAddr string
	// ServerTLS secures accepted connections, ClientTLS dialled ones. Both
	// are required: ServerTLS.ClientCAs and ClientTLS.RootCAs hold the
	// cluster CA, and client certificates are required and verified.
	ServerTLS, ClientTLS *tls.Config
	// Bootstrap forms a one-member cluster when there is no raft state
	// yet. A state.db already holding data (a single server converted, a
	// restored snapshot) becomes the cluster's initial state.
	Bootstrap bool
	// CompactInterval is how often the leader compacts history (0: never).
	CompactInterval time.Duration
	// ApplyTimeout bounds how long a write or a linearizable read waits for
	// a leader or a quorum before failing with store.ErrUnavailable (5s).
	ApplyTimeout time.Duration
	// Raft timings; the defaults (500ms, 500ms, 250ms) fail over in < 2s
	// on a LAN.
	HeartbeatTimeout, ElectionTimeout, LeaderLeaseTimeout time.Duration
	// Logger receives the store's logs and raft's warnings and errors.
	Logger *slog.Logger

	// SnapshotThreshold is how many log entries trigger a snapshot (8192),
	// TrailingLogs how many stay in the log after one (10240), so that a
	// follower briefly away catches up from the log rather than a
	// snapshot. SnapshotInterval is how often the threshold is checked
	// (30s). Tests lower them.
	SnapshotThreshold, TrailingLogs uint64
	SnapshotInterval                time.Duration
	// AddressOf, when set, gives a member's current address by ID,
	// overriding the one recorded in the raft configuration ("" keeps
	// it). Tests use it to route members through proxies and to move
	// members to fresh ports.
	AddressOf func(id string) string
}

// Member is one server of the cluster.
type Member struct {
	ID, Address   string
	Voter, Leader bool
}

const (
	defaultPort       = "2380"
	commitTimeout     = 5 * time.Millisecond
	retryDelay        = 20 * time.Millisecond
	maxBatch          = 512 // commands per log entry
	maxWritesInFlight = 4   // log entries a member has in flight at once
)

func (cfg Config) withDefaults() (Config, error) {
	if cfg.Dir == "" {
		return cfg, errors.New("raft: Config.Dir is empty")
	}
	if cfg.ID == "" {
		return cfg, errors.New("raft: Config.ID is empty")
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = ":" + defaultPort
	}
	if cfg.AdvertiseAddr == "" {
		host, _, err := net.SplitHostPort(cfg.BindAddr)
		if err != nil {
			return cfg, fmt.Errorf("raft: BindAddr %q: %w", cfg.BindAddr, err)
		}
		if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
			return cfg, fmt.Errorf("raft: AdvertiseAddr is needed when BindAddr %q names no specific IP", cfg.BindAddr)
		}
	}
	if cfg.ServerTLS == nil || cfg.ClientTLS == nil {
		return cfg, errors.New("raft: ServerTLS and ClientTLS are required (mutual TLS with the cluster CA)")
	}
	if cfg.ServerTLS.ClientCAs == nil {
		return cfg, errors.New("raft: ServerTLS.ClientCAs must hold the cluster CA")
	}
	if cfg.ClientTLS.RootCAs == nil {
		return cfg, errors.New("raft: ClientTLS.RootCAs must hold the cluster CA")
	}
	cfg.ServerTLS = cfg.ServerTLS.Clone()
	cfg.ServerTLS.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientTLS = cfg.ClientTLS.Clone()
	for _, c := range []*tls.Config{cfg.ServerTLS, cfg.ClientTLS} {
		if c.MinVersion == 0 {
			c.MinVersion = tls.VersionTLS13
		}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.ApplyTimeout, 5*time.Second)
	def(&cfg.HeartbeatTimeout, 500*time.Millisecond)
	def(&cfg.ElectionTimeout, 500*time.Millisecond)
	def(&cfg.LeaderLeaseTimeout, 250*time.Millisecond)
	def(&cfg.SnapshotInterval, 30*time.Second)
	if cfg.LeaderLeaseTimeout > cfg.HeartbeatTimeout {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	}
	if cfg.SnapshotThreshold == 0 {
		cfg.SnapshotThreshold = 8192
	}
	if cfg.TrailingLogs == 0 {
		cfg.TrailingLogs = 10240
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}
