package flowcontrol

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"skiff/server/auth"
	"skiff/server/flowcontrol/bootstrap"
)

// oneSeat configures c with a level "tiny" that gets exactly one seat
// (the server limit is split by shares: tiny 1 share, catch-all's 5 and
// exempt's 0 with a limit of 6), and a FlowSchema sending alice there.
func oneSeat(t *testing.T, limitResponse flowcontrolv1.LimitResponse) *Controller {
	t.Helper()
	c := New(Config{ServerConcurrencyLimit: 6})
	pl := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "tiny", UID: "pl-uid"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(int32(1)), LimitResponse: limitResponse}},
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: "alice", UID: "fs-uid"},
		Spec: flowcontrolv1.FlowSchemaSpec{MatchingPrecedence: 100, PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "tiny"},
			DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects:         []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "alice"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
			}}},
	}
	c.rebuild([]*flowcontrolv1.FlowSchema{fs}, append(bootstrap.MandatoryPriorityLevelConfigurations(), pl))
	if got := c.snap.Load().levels["tiny"].set.seats; got != 1 {
		t.Fatalf("tiny has %d seats, want 1", got)
	}
	return c
}

var aliceGet = auth.Attributes{User: &auth.User{Name: "alice", Groups: []string{auth.GroupAuthenticated}}, Verb: "get", Path: "/version"}

func admit(c *Controller, ctx context.Context, a auth.Attributes) (func(), http.Header, error) {
	h := http.Header{}
	r := httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx)
	done, err := c.Admit(r, h, a)
	return done, h, err
}

// stuck bounds a wait that a broken level would make endless; reaching it
// is a hang, not a slow pass.
const stuck = 30 * time.Second

// waitForWaiting blocks until the level has n queued requests: it waits
// on the level's change notifications, not on time.
func waitForWaiting(t *testing.T, l *level, n int) {
	t.Helper()
	for {
		_, waiting, changed := l.state()
		if waiting == n {
			return
		}
		select {
		case <-changed:
		case <-time.After(stuck):
			t.Fatalf("the level never had %d queued requests (has %d)", n, waiting)
		}
	}
}

// result waits for a request started in a goroutine to be admitted or refused.
func result(t *testing.T, admitted <-chan error) error {
	t.Helper()
	select {
	case err := <-admitted:
		return err
	case <-time.After(stuck):
		t.Fatal("the queued request was never admitted nor refused")
		return nil
	}
}

func TestAdmit_RejectLevelFull_429WithRetryAfter(t *testing.T) {
	c := oneSeat(t, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject})
	done, h, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	if h.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "fs-uid" || h.Get(flowcontrolv1.ResponseHeaderMatchedPriorityLevelConfigurationUID) != "pl-uid" {
		t.Errorf("headers = %v, want the matched FlowSchema's and level's UIDs", h)
	}
	_, h2, err := admit(c, context.Background(), aliceGet)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("second request while the seat is taken: err = %v, want 429", err)
	}
	if h2.Get("Retry-After") == "" || h2.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "fs-uid" {
		t.Errorf("rejection headers = %v, want Retry-After and the FlowSchema UID", h2)
	}
	done()
	done() // idempotent: a second call must not free a seat nobody holds
	done3, _, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatalf("request after the seat was freed: %v", err)
	}
	if _, _, err := admit(c, context.Background(), aliceGet); !apierrors.IsTooManyRequests(err) {
		t.Errorf("double done freed a second seat: err = %v", err)
	}
	done3()
}

func TestAdmit_QueuingLevelFull_WaitsThenRunsWhenSeatFrees(t *testing.T) {
	c := oneSeat(t, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
		Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 1, HandSize: 1, QueueLengthLimit: 1}})
	lvl := c.snap.Load().levels["tiny"].level
	first, _, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	go func() {
		done, _, err := admit(c, context.Background(), aliceGet)
		if err == nil {
			defer done()
		}
		admitted <- err
	}()
	waitForWaiting(t, lvl, 1)
	select {
	case err := <-admitted:
		t.Fatalf("second request ran while the only seat was taken (err %v)", err)
	default:
	}
	// The queue (length 1) is full now: a third request is turned away.
	if _, _, err := admit(c, context.Background(), aliceGet); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("third request with a full queue: err = %v, want 429", err)
	}
	first()
	if err := result(t, admitted); err != nil {
		t.Fatalf("queued request after the seat freed: %v", err)
	}
}

func TestAdmit_QueuedRequestGivesUp_429(t *testing.T) {
	c := oneSeat(t, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
		Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 4, HandSize: 2, QueueLengthLimit: 5}})
	lvl := c.snap.Load().levels["tiny"].level
	first, _, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	ctx, cancel := context.WithCancel(context.Background())
	admitted := make(chan error, 1)
	go func() {
		_, _, err := admit(c, ctx, aliceGet)
		admitted <- err
	}()
	waitForWaiting(t, lvl, 1)
	cancel() // the client went away (or the wait limit passed)
	if err := result(t, admitted); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("abandoned request: err = %v, want 429", err)
	}
	if _, waiting, _ := lvl.state(); waiting != 0 {
		t.Errorf("%d requests still queued, want the abandoned one gone", waiting)
	}
}

func TestAdmit_ExemptAndLongRunning_NeverWait(t *testing.T) {
	c := oneSeat(t, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject})
	taken, _, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatal(err)
	}
	defer taken()
	admin := auth.Attributes{User: &auth.User{Name: "admin", Groups: []string{auth.GroupMasters}}, Verb: "get", Path: "/version"}
	exec := auth.Attributes{User: aliceGet.User, Verb: "create", ResourceRequest: true, Resource: "pods", Subresource: "exec", Namespace: "default", Name: "p"}
	for name, a := range map[string]auth.Attributes{"exempt": admin, "exec": exec} {
		for i := range 3 {
			if _, _, err := admit(c, context.Background(), a); err != nil {
				t.Errorf("%s request %d: %v", name, i, err)
			}
		}
	}
	// A watch takes the seat only to start, so while it is held the watch
	// is turned away, and a started watch holds nothing.
	watch := auth.Attributes{User: aliceGet.User, Verb: "watch", ResourceRequest: true, Resource: "pods", Namespace: "default"}
	if _, _, err := admit(c, context.Background(), watch); !apierrors.IsTooManyRequests(err) {
		t.Errorf("watch with the seat taken: err = %v, want 429", err)
	}
}

func TestRebuild_MoreShares_MoreSeatsForWaiters(t *testing.T) {
	c := oneSeat(t, flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
		Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 2, HandSize: 1, QueueLengthLimit: 10}})
	snap := c.snap.Load()
	lvl := snap.levels["tiny"].level
	first, _, err := admit(c, context.Background(), aliceGet)
	if err != nil {
		t.Fatal(err)
	}
	defer first()
	admitted := make(chan error, 1)
	go func() {
		done, _, err := admit(c, context.Background(), aliceGet)
		if err == nil {
			defer done()
		}
		admitted <- err
	}()
	waitForWaiting(t, lvl, 1)
	// The level's shares go up: its seats follow live, and the waiting
	// request gets one without any seat being released.
	pl := &flowcontrolv1.PriorityLevelConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tiny", UID: "pl-uid"},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr.To(int32(5)),
				LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 3, HandSize: 2, QueueLengthLimit: 10}}}}}
	pls := append(bootstrap.MandatoryPriorityLevelConfigurations(), pl)
	c.rebuild(snap.schemas, pls)
	if err := result(t, admitted); err != nil {
		t.Fatalf("waiting request after the level grew: %v", err)
	}
	if got := c.snap.Load().levels["tiny"].level; got != lvl {
		t.Errorf("the level was replaced; requests in flight would lose their seats")
	}
}

func TestDeal_DistinctCardsInDeck(t *testing.T) {
	for _, tc := range []struct{ deck, hand int }{{1, 1}, {8, 8}, {64, 6}, {128, 6}, {16, 4}} {
		for _, h := range []uint64{0, 1, 12345, ^uint64(0), 0xdeadbeefcafe} {
			cards := deal(h, tc.deck, tc.hand)
			seen := map[int]bool{}
			for _, c := range cards {
				if c < 0 || c >= tc.deck || seen[c] {
					t.Fatalf("deal(%d, %d, %d) = %v: cards must be distinct and in the deck", h, tc.deck, tc.hand, cards)
				}
				seen[c] = true
			}
			if len(cards) != tc.hand {
				t.Fatalf("deal(%d, %d, %d) = %v, want %d cards", h, tc.deck, tc.hand, cards, tc.hand)
			}
		}
	}
	if a, b := deal(flowHash("fs", "alice"), 64, 6), deal(flowHash("fs", "bob"), 64, 6); slices.Equal(a, b) {
		t.Errorf("two flows got the same hand %v", a)
	}
}
