package raft

import (
	"context"
	"errors"
	"fmt"

	hraft "github.com/hashicorp/raft"

	"skiff/store"
)

// Members lists the cluster's members as this member knows them (the
// latest configuration, committed or not).
func (s *Store) Members(ctx context.Context) ([]Member, error) {
	if s.isClosed() {
		return nil, store.ErrClosed
	}
	f := s.raft.GetConfiguration()
	if err := s.waitFuture(ctx, f); err != nil {
		return nil, s.unavailable(ctx, err)
	}
	leader, _ := s.Leader()
	var out []Member
	for _, srv := range f.Configuration().Servers {
		out = append(out, Member{
			ID:      string(srv.ID),
			Address: string(srv.Address),
			Voter:   srv.Suffrage == hraft.Voter,
			Leader:  string(srv.ID) == leader,
		})
	}
	return out, nil
}

// Leader is the current leader's ID and address ("" when none is known).
func (s *Store) Leader() (id, addr string) {
	if s.isClosed() {
		return "", ""
	}
	a, i := s.raft.LeaderWithID()
	return string(i), string(a)
}

// Ready returns nil iff a leader is known and a linearizable read succeeds
// within ctx (and ApplyTimeout); otherwise an error wrapping
// store.ErrUnavailable (or store.ErrClosed).
func (s *Store) Ready(ctx context.Context) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	if id, _ := s.Leader(); id == "" {
		return fmt.Errorf("%w: no leader known", store.ErrUnavailable)
	}
	if err := s.linearize(ctx); err != nil {
		if errors.Is(err, store.ErrClosed) || errors.Is(err, store.ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return nil
}

// AddVoter makes id (at addr) a voting member; on any member, the leader
// does it. Adding a member that is already a voter at addr changes
// nothing; a member with the same ID and another address gets the new one.
func (s *Store) AddVoter(ctx context.Context, id, addr string) error {
	if id == "" || addr == "" {
		return errors.New("raft: AddVoter needs an ID and an address")
	}
	return s.onLeader(ctx, rpcAddVoter, id, addr, func(ctx context.Context) error {
		return s.addVoterAsLeader(ctx, id, addr)
	})
}

// RemoveMember removes id from the cluster (nothing if it is not in it);
// on any member, the leader does it.
func (s *Store) RemoveMember(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("raft: RemoveMember needs an ID")
	}
	return s.onLeader(ctx, rpcRemove, id, "", func(ctx context.Context) error {
		return s.removeAsLeader(ctx, id)
	})
}

// onLeader runs a membership change on the leader: here if this member
// leads, otherwise by RPC. Changes are idempotent, so they are retried
// until the deadline whatever failed.
func (s *Store) onLeader(ctx context.Context, typ rpcType, id, addr string, local func(context.Context) error) error {
	if s.isClosed() {
		return store.ErrClosed
	}
	c, cancel := context.WithTimeout(ctx, s.cfg.ApplyTimeout)
	defer cancel()
	last := fmt.Errorf("%w: no leader known", store.ErrUnavailable) // retried: one may be elected before the deadline
	for {
		var err error
		if s.raft.State() == hraft.Leader {
			err = local(c)
		} else if _, laddr := s.leader(); laddr != "" {
			var resp rpcResp
			err = s.rpc.call(c, laddr, typ, memberReq{ID: id, Addr: addr, TimeoutMS: remainingMS(c)}, &resp)
			if err == nil {
				err = decodeErr(resp.Code, resp.Msg)
			}
		} else {
			err = last
		}
		if err == nil {
			return nil
		}
		last = err
		if !errors.Is(err, errNotLeader) && !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, errNotSent) {
			return err
		}
		if !sleep(c, retryDelay) {
			return s.unavailable(ctx, fmt.Errorf("membership change: %w", last))
		}
	}
}

func (s *Store) addVoterAsLeader(ctx context.Context, id, addr string) error {
	if s.raft.State() != hraft.Leader {
		return errNotLeader
	}
	cf := s.raft.GetConfiguration()
	if err := s.waitFuture(ctx, cf); err != nil {
		return err
	}
	for _, srv := range cf.Configuration().Servers {
		if string(srv.ID) == id && string(srv.Address) == addr && srv.Suffrage == hraft.Voter {
			return nil
		}
	}
	s.log.Info("raft: adding voter", "id", id, "address", addr)
	return s.waitFuture(ctx, s.raft.AddVoter(hraft.ServerID(id), hraft.ServerAddress(addr), 0, remaining(ctx)))
}

func (s *Store) removeAsLeader(ctx context.Context, id string) error {
	if s.raft.State() != hraft.Leader {
		return errNotLeader
	}
	cf := s.raft.GetConfiguration()
	if err := s.waitFuture(ctx, cf); err != nil {
		return err
	}
	found, voters := false, 0
	for _, srv := range cf.Configuration().Servers {
		found = found || string(srv.ID) == id
		if srv.Suffrage == hraft.Voter {
			voters++
		}
	}
	if !found {
		return nil
	}
	if id == s.cfg.ID {
		// A leader removing itself shuts raft down from inside (and
		// Close could then not wait for it): hand leadership over and
		// let the next leader remove this member.
		if voters < 2 {
			return errors.New("raft: cannot remove the only voter")
		}
		if err := s.waitFuture(ctx, s.raft.LeadershipTransfer()); err != nil {
			return err
		}
		return errNotLeader
	}
	s.log.Info("raft: removing member", "id", id)
	return s.waitFuture(ctx, s.raft.RemoveServer(hraft.ServerID(id), 0, remaining(ctx)))
}

// fixOwnAddress asks the leader to record this member's current address
// when the configuration holds another one (the member came back on a new
// address). Until then the others may not reach it; it can reach them.
func (s *Store) fixOwnAddress() {
	if s.raft.State() == hraft.Shutdown {
		return
	}
	own := s.stream.Addr().String()
	ctx, cancel := context.WithTimeout(s.bg, s.cfg.ApplyTimeout)
	defer cancel()
	f := s.raft.GetConfiguration()
	if err := s.waitFuture(ctx, f); err != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) != s.cfg.ID {
			continue
		}
		if string(srv.Address) == own || srv.Suffrage != hraft.Voter {
			return
		}
		if id, _ := s.Leader(); id == "" {
			return
		}
		if err := s.AddVoter(ctx, s.cfg.ID, own); err != nil && !s.isClosed() {
			s.log.Warn("raft: could not update this member's address", "address", own, "err", err)
		}
		return
	}
}

// Addr is the address this member advertises to the others.
func (s *Store) Addr() string { return s.stream.Addr().String() }

// ID is this member's ID.
func (s *Store) ID() string { return s.cfg.ID }
