package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"skiff/jointoken"
	"skiff/server/bootstrapdata"
	"skiff/server/certs"
	"skiff/server/join"
	"skiff/store"
	"skiff/store/etcd"
	"skiff/store/raft"
	"skiff/store/sqlite"
)

// DatastoreConfig chooses the state store: SQLite on one server (the
// default), the embedded Raft store across servers (--cluster-init on
// the first, --server and the server token on the others; a data
// directory that holds Raft state keeps using it), or an external etcd
// cluster (--datastore-endpoint), as k3s's flags.
type DatastoreConfig struct {
	// ClusterInit starts a one-member Raft cluster (converting an existing
	// single-server database into its initial state).
	ClusterInit bool
	// JoinURL is a server of the cluster to join (--server).
	JoinURL string
	// ClusterReset makes this server's Raft data a one-member cluster
	// holding every write it has, then returns (restart without it).
	ClusterReset bool
	// RaftPort is the Raft transport's port (--raft-port, 2380).
	RaftPort int
	// Endpoint, CAFile, CertFile and KeyFile are --datastore-endpoint and
	// --datastore-cafile/-certfile/-keyfile.
	Endpoint                  string
	CAFile, CertFile, KeyFile string
	// ElectionTimeout, when set, overrides Raft's heartbeat and election
	// timeouts (tests shorten failover).
	ElectionTimeout time.Duration
}

// RaftDir is where the embedded Raft store keeps its state.
func RaftDir(dataDir string) string {
	return filepath.Join(dataDir, "server", "db", "raft")
}

// ErrClusterReset is returned by Run after --cluster-reset did its work.
var ErrClusterReset = errors.New("the cluster membership was reset to this server alone: restart without --cluster-reset")

// datastore is the opened store and, for the embedded cluster, its member.
type datastore struct {
	store.Store
	member *raft.Store // nil unless the store is the embedded Raft store
	kind   string
}

// waitReady blocks until the store serves linearizable reads: a server
// that restarts behind the others must catch up first (the leader's
// replication to a member it saw die backs off up to about 10 s), and
// one without quorum waits for it, as k3s waits for etcd, instead of
// failing its start.
func (d datastore) waitReady(ctx context.Context, log *slog.Logger) error {
	return retry(ctx, log, "wait until the store has quorum and this member caught up", func() error {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return d.ready(c)
	})
}

// ready is the /readyz store check: a store that can say whether it
// serves linearizable reads says so, others answer CurrentRevision.
func (d datastore) ready(ctx context.Context) error {
	if r, ok := d.Store.(interface{ Ready(context.Context) error }); ok {
		return r.Ready(ctx)
	}
	_, err := d.Store.CurrentRevision(ctx)
	return err
}

func (c DatastoreConfig) embedded(dataDir string) bool {
	if c.ClusterInit || c.JoinURL != "" || c.ClusterReset {
		return true
	}
	_, err := os.Stat(RaftDir(dataDir))
	return err == nil
}

func (c DatastoreConfig) check() error {
	if c.Endpoint != "" && (c.ClusterInit || c.JoinURL != "" || c.ClusterReset) {
		return errors.New("--datastore-endpoint uses an external etcd: it excludes --cluster-init, --server and --cluster-reset")
	}
	if c.ClusterInit && c.JoinURL != "" {
		return errors.New("--cluster-init starts a new cluster, --server joins one: give one of them")
	}
	return nil
}

// fetchClusterFiles gives a server joining with --server the cluster's
// shared secrets before its certificates are made: once the CA is on
// disk (a restart), nothing is fetched.
func fetchClusterFiles(ctx context.Context, cfg Config, log *slog.Logger) error {
	d := cfg.Datastore
	if d.JoinURL == "" {
		return nil
	}
	dir := TLSDir(cfg.DataDir)
	if _, err := os.Stat(filepath.Join(dir, certs.CACertFile)); err == nil {
		return nil
	}
	tok, err := jointoken.Parse(cfg.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	cc := &join.ClusterClient{ServerURL: d.JoinURL, Token: tok}
	var files map[string][]byte
	err = retry(ctx, log, "fetch the cluster's secrets from "+d.JoinURL, func() error {
		files, err = cc.FetchClusterFiles(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if err := installSharedFiles(dir, files, true); err != nil {
		return err
	}
	log.Info("received the cluster's CA and keys", "from", d.JoinURL)
	return nil
}

// clusterFiles is what fetchClusterFiles receives, read from this
// server's TLS directory.
func clusterFiles(dataDir string) func() (map[string][]byte, error) {
	return func() (map[string][]byte, error) {
		out := map[string][]byte{}
		for _, name := range certs.SharedFiles() {
			data, err := os.ReadFile(filepath.Join(TLSDir(dataDir), name))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[name] = data
		}
		return out, nil
	}
}

// openDatastoreAndCerts opens the store and makes the certificates, in
// the order the store needs: a server joining the embedded cluster first
// receives the cluster's CA and keys (its Raft peer certificate comes
// from that CA); servers on an external etcd share theirs through the
// datastore (bootstrapdata), so it opens first. cfg.Token is set when a
// first server on etcd makes the token others must be given.
func openDatastoreAndCerts(ctx context.Context, cfg *Config, ensureCerts func() (*certs.Bundle, error), log *slog.Logger) (*datastore, *certs.Bundle, error) {
	if err := cfg.Datastore.check(); err != nil {
		return nil, nil, err
	}
	if cfg.Datastore.Endpoint != "" {
		ds, err := openEtcd(ctx, *cfg, log)
		if err != nil {
			return nil, nil, err
		}
		bundle, err := shareBootstrap(ctx, cfg, ds, ensureCerts, log)
		if err != nil {
			ds.Close()
			return nil, nil, err
		}
		return ds, bundle, nil
	}
	if err := fetchClusterFiles(ctx, *cfg, log.With("component", "join")); err != nil {
		return nil, nil, err
	}
	bundle, err := ensureCerts()
	if err != nil {
		return nil, nil, fmt.Errorf("certificates: %w", err)
	}
	ds, err := openDatastore(ctx, *cfg, bundle, log)
	return ds, bundle, err
}

func openEtcd(ctx context.Context, cfg Config, log *slog.Logger) (*datastore, error) {
	d := cfg.Datastore
	st, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{d.Endpoint}, CAFile: d.CAFile, CertFile: d.CertFile, KeyFile: d.KeyFile,
		CompactInterval: cfg.CompactInterval, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open the etcd datastore: %w", err)
	}
	return &datastore{Store: st, kind: "etcd"}, nil
}

// shareBootstrap gives a server on an external datastore the cluster's
// CA and keys, as k3s does with its bootstrap data: the first server
// publishes its own, sealed with the server token; the others, started
// with that token, receive them before their certificates are made. Two
// first servers racing: the one whose publish loses takes the winner's
// files instead of the ones it just made.
func shareBootstrap(ctx context.Context, cfg *Config, ds *datastore, ensureCerts func() (*certs.Bundle, error), log *slog.Logger) (*certs.Bundle, error) {
	secret, _, err := join.ServerSecret(cfg.DataDir, cfg.Token)
	if err != nil {
		return nil, err
	}
	if secret == "" {
		if secret, err = jointoken.NewSecret(); err != nil {
			return nil, err
		}
		cfg.Token = secret
	}
	if err := ds.waitReady(ctx, log); err != nil {
		return nil, err
	}
	dir := TLSDir(cfg.DataDir)
	_, statErr := os.Stat(filepath.Join(dir, certs.CACertFile))
	fresh := errors.Is(statErr, os.ErrNotExist)
	var files map[string][]byte
	var found bool
	err = retry(ctx, log, "read the cluster's bootstrap data from the datastore", func() error {
		files, found, err = bootstrapdata.Fetch(ctx, ds.Store, secret)
		if errors.Is(err, bootstrapdata.ErrOtherCluster) || errors.Is(err, bootstrapdata.ErrWrongToken) {
			return fmt.Errorf("%w: %w", errNoRetry, err)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if found {
		if err := installSharedFiles(dir, files, fresh); err != nil {
			return nil, err
		}
		log.Info("received the cluster's CA and keys from the datastore")
	}
	bundle, err := ensureCerts()
	if err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	if found {
		return bundle, nil
	}
	if _, err := certs.EnsureFrontProxy(certs.Config{Dir: dir}); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	mine, err := clusterFiles(cfg.DataDir)()
	if err != nil {
		return nil, err
	}
	var stored map[string][]byte
	var won bool
	err = retry(ctx, log, "publish the cluster's bootstrap data to the datastore", func() error {
		stored, won, err = bootstrapdata.Publish(ctx, ds.Store, secret, mine)
		return err
	})
	if err != nil {
		return nil, err
	}
	if won {
		log.Info("published this cluster's CA and keys to the datastore, sealed with the server token")
		return bundle, nil
	}
	if !fresh { // same CA (a restart racing nothing) or a refusal
		if err := installSharedFiles(dir, stored, false); err != nil {
			return nil, err
		}
		return bundle, nil
	}
	// Lost the race with another first server: its files replace the
	// ones made a moment ago, and every certificate is made again.
	log.Info("another server published the cluster's CA first: using it")
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := installSharedFiles(dir, stored, true); err != nil {
		return nil, err
	}
	return ensureCerts()
}

// installSharedFiles writes the cluster's shared files into a fresh TLS
// directory; into one that has a CA already only when it is the same CA
// (a restart), never replacing the CA a server's certificates come from.
func installSharedFiles(dir string, files map[string][]byte, fresh bool) error {
	if !fresh {
		have, err := os.ReadFile(filepath.Join(dir, certs.CACertFile))
		if err != nil {
			return err
		}
		if !bytes.Equal(have, files[certs.CACertFile]) {
			return fmt.Errorf("this server's CA (%s) is not the cluster's in the datastore: move %s aside to take the cluster's", filepath.Join(dir, certs.CACertFile), dir)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, name := range certs.SharedFiles() {
		data, ok := files[name]
		if !ok {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

// openDatastore opens the store cfg chooses. For the embedded cluster it
// also converts a single-server database (--cluster-init), resets
// (--cluster-reset: ErrClusterReset) and joins (--server).
func openDatastore(ctx context.Context, cfg Config, bundle *certs.Bundle, log *slog.Logger) (*datastore, error) {
	switch d := cfg.Datastore; {
	case d.Endpoint != "":
		return openEtcd(ctx, cfg, log)
	case d.embedded(cfg.DataDir):
		return openRaft(ctx, cfg, bundle, log)
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: StorePath(cfg.DataDir), CompactInterval: cfg.CompactInterval, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &datastore{Store: st, kind: "sqlite"}, nil
}

func openRaft(ctx context.Context, cfg Config, bundle *certs.Bundle, log *slog.Logger) (*datastore, error) {
	d := cfg.Datastore
	rc, err := raftConfig(cfg, bundle, log)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(filepath.Join(rc.Dir, "raft.db"))
	fresh := errors.Is(statErr, os.ErrNotExist)
	if d.ClusterReset {
		if fresh {
			return nil, fmt.Errorf("--cluster-reset: no Raft state in %s to reset", rc.Dir)
		}
		if err := raft.ResetCluster(ctx, rc); err != nil {
			return nil, fmt.Errorf("--cluster-reset: %w", err)
		}
		log.Info("cluster membership reset: this server is now a one-member cluster with all its data; restart it without --cluster-reset, then join the others afresh")
		return nil, ErrClusterReset
	}
	if fresh && d.JoinURL == "" {
		if !d.ClusterInit {
			return nil, fmt.Errorf("%s holds no Raft state: start with --cluster-init or --server", rc.Dir)
		}
		if err := convertSingleServer(ctx, cfg, rc.Dir, log); err != nil {
			return nil, err
		}
		rc.Bootstrap = true
	}
	st, err := raft.Open(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("open the Raft store: %w", err)
	}
	if fresh && d.JoinURL != "" {
		if err := requestMembership(ctx, cfg, bundle, st, log); err != nil {
			st.Close()
			return nil, err
		}
	}
	return &datastore{Store: st, member: st, kind: "raft"}, nil
}

// raftConfig is the member's configuration: its ID is the node name, its
// transport listens on --raft-port with a peer certificate of the
// cluster CA for its advertise address.
func raftConfig(cfg Config, bundle *certs.Bundle, log *slog.Logger) (raft.Config, error) {
	d := cfg.Datastore
	port := d.RaftPort
	if port == 0 {
		port = 2380
	}
	id, err := memberName(cfg)
	if err != nil {
		return raft.Config{}, err
	}
	ip := advertiseAddress(cfg.AdvertiseAddress)
	peer, err := bundle.IssuePeerCert("skiff-peer-"+id, append([]net.IP{ip, net.IPv4(127, 0, 0, 1)}, hostAddresses()...), []string{"localhost"}, 365*24*time.Hour)
	if err != nil {
		return raft.Config{}, fmt.Errorf("peer certificate: %w", err)
	}
	serverTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{peer},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: bundle.CAPool()}
	clientTLS := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{peer}, RootCAs: bundle.CAPool()}
	rc := raft.Config{
		Dir:             RaftDir(cfg.DataDir),
		ID:              id,
		BindAddr:        net.JoinHostPort(cfg.BindAddress, strconv.Itoa(port)),
		AdvertiseAddr:   net.JoinHostPort(ip.String(), strconv.Itoa(port)),
		ServerTLS:       serverTLS,
		ClientTLS:       clientTLS,
		CompactInterval: cfg.CompactInterval,
		Logger:          log,
	}
	if d.ElectionTimeout > 0 {
		rc.ElectionTimeout, rc.HeartbeatTimeout, rc.LeaderLeaseTimeout = d.ElectionTimeout, d.ElectionTimeout, d.ElectionTimeout/2
	}
	return rc, nil
}

// convertSingleServer makes the single-server database, if there is one,
// the new cluster's initial state (k3s converts SQLite to etcd the same
// way); the old file is kept aside, never used again.
func convertSingleServer(ctx context.Context, cfg Config, dir string, log *slog.Logger) error {
	old := StorePath(cfg.DataDir)
	if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := sqlite.BackupFile(ctx, old, filepath.Join(dir, "state.db")); err != nil {
		return fmt.Errorf("--cluster-init: convert %s: %w", old, err)
	}
	aside := old + ".converted-to-raft"
	if err := os.Rename(old, aside); err != nil {
		return fmt.Errorf("--cluster-init: %w", err)
	}
	for _, sfx := range []string{"-wal", "-shm"} {
		os.Remove(old + sfx)
	}
	log.Info("converted the single-server database into the cluster's initial state", "kept-aside", aside)
	return nil
}

// requestMembership asks the server at --server to add this member, until
// it does or ctx ends.
func requestMembership(ctx context.Context, cfg Config, bundle *certs.Bundle, st *raft.Store, log *slog.Logger) error {
	tok, err := jointoken.Parse(cfg.Token)
	if err != nil {
		return fmt.Errorf("--token: %w", err)
	}
	cc := &join.ClusterClient{ServerURL: cfg.Datastore.JoinURL, Token: tok}
	id, addr := st.ID(), st.Addr()
	return retry(ctx, log, "join the cluster through "+cfg.Datastore.JoinURL, func() error {
		return cc.RequestMembership(ctx, bundle.CACertPEM(), id, addr)
	})
}

// errNoRetry marks an error retry gives up on at once.
var errNoRetry = errors.New("not retried")

// retry runs fn until it succeeds, ctx ends or it is refused for good
// (401/403/400-like answers are not retried).
func retry(ctx context.Context, log *slog.Logger, what string, fn func() error) error {
	delay := 500 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if errors.Is(err, errNoRetry) || errors.Is(err, jointoken.ErrCAMismatch) || errors.Is(err, join.ErrServerJoin) && !retryable(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		log.Warn("retrying", "what", what, "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// retryable says whether a server's refusal may pass (no leader yet).
func retryable(err error) bool {
	var se *join.StatusError
	if errors.As(err, &se) {
		return se.Code == 503 || se.Code >= 500
	}
	return false
}

// joinSetup is what the join handler needs to let servers join: nothing
// unless the store is the embedded cluster.
type joinSetup struct {
	files func() (map[string][]byte, error)
	adder join.MemberAdder
}

func joinMembers(cfg Config, ds *datastore) joinSetup {
	if ds.member == nil {
		return joinSetup{}
	}
	return joinSetup{files: clusterFiles(cfg.DataDir), adder: ds.member}
}
