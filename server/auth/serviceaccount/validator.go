package serviceaccount

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"skiff/server/auth"
)

// Lookup reports the live objects a token is bound to, so tokens die with
// them. Implementations may report an object that is being deleted as
// absent.
type Lookup interface {
	// ServiceAccountUID returns the current UID of the named SA, or ok=false if it does not exist.
	ServiceAccountUID(ctx context.Context, namespace, name string) (uid string, ok bool, err error)
	// PodUID returns the current UID of the named pod, or ok=false.
	PodUID(ctx context.Context, namespace, name string) (uid string, ok bool, err error)
}

// NodeLookup may also be implemented by a Lookup; then tokens bound
// directly to a node (not through a pod) are refused once the node is gone.
type NodeLookup interface {
	NodeUID(ctx context.Context, name string) (uid string, ok bool, err error)
}

// Validator authenticates service-account tokens. It is safe for
// concurrent use.
type Validator struct {
	pub       crypto.PublicKey
	issuer    string
	audiences []string
	lookup    Lookup
	now       func() time.Time
}

// NewValidator accepts tokens signed by pub's private half, issued by
// issuer (empty: DefaultIssuer) for at least one of audiences (empty: the
// issuer). A nil lookup skips the liveness checks, so tokens of deleted
// service accounts stay valid until they expire; production callers should
// pass one.
func NewValidator(pub crypto.PublicKey, issuer string, audiences []string, lookup Lookup) *Validator {
	if issuer == "" {
		issuer = DefaultIssuer
	}
	if len(audiences) == 0 {
		audiences = []string{issuer}
	}
	return &Validator{pub: pub, issuer: issuer, audiences: slices.Clone(audiences), lookup: lookup, now: time.Now}
}

// Validate checks token and returns the service account's user. Every
// error wraps one of the package's Err* sentinels.
func (v *Validator) Validate(ctx context.Context, token string) (*auth.User, error) {
	c, err := v.parse(token)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(v.audiences, a) }) {
		return nil, fmt.Errorf("%w: token is for %q, this server accepts %q", ErrWrongAudience, []string(c.Audience), v.audiences)
	}
	if err := checkClaims(c); err != nil {
		return nil, err
	}
	if err := v.checkBindings(ctx, c.Kubernetes); err != nil {
		return nil, err
	}
	return userFor(c), nil
}

// parse verifies signature, algorithm, issuer and times.
func (v *Validator) parse(token string) (*claims, error) {
	method, err := signingMethod(v.pub)
	if err != nil {
		return nil, err
	}
	// Read iss before trusting anything: a token minted elsewhere is
	// reported as not ours rather than as forged, which is the signal a
	// chain of authenticators needs to move on.
	var peek jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); errors.Is(err, jwt.ErrTokenMalformed) {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if peek.Issuer != v.issuer {
		return nil, fmt.Errorf("%w: %q", ErrWrongIssuer, peek.Issuer)
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{method.Alg()}),
		jwt.WithIssuer(v.issuer),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(v.now),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
	)
	c := &claims{}
	if _, err := p.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return v.pub, nil }); err != nil {
		return nil, classify(err)
	}
	return c, nil
}

// classify maps the JWT library's errors onto this package's sentinels,
// keeping the library's message for the detail.
func classify(err error) error {
	var sentinel error
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		sentinel = ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		sentinel = ErrInvalidSignature
	case errors.Is(err, jwt.ErrTokenExpired):
		sentinel = ErrExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		sentinel = ErrNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		sentinel = ErrWrongIssuer
	default:
		sentinel = ErrInvalidClaims
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}

// checkClaims refuses tokens whose kubernetes.io claim is missing or does
// not agree with sub.
func checkClaims(c *claims) error {
	k := c.Kubernetes
	switch {
	case k == nil:
		return fmt.Errorf("%w: no kubernetes.io claim", ErrInvalidClaims)
	case k.Namespace == "" || k.ServiceAccount.Name == "" || k.ServiceAccount.UID == "":
		return fmt.Errorf("%w: namespace, service account name and uid are required", ErrInvalidClaims)
	case c.Subject != UserName(k.Namespace, k.ServiceAccount.Name):
		return fmt.Errorf("%w: sub %q does not match kubernetes.io claim", ErrInvalidClaims, c.Subject)
	case k.Pod != nil && (k.Pod.Name == "" || k.Pod.UID == ""):
		return fmt.Errorf("%w: pod binding without name or uid", ErrInvalidClaims)
	case k.Node != nil && (k.Node.Name == "" || k.Node.UID == ""):
		return fmt.Errorf("%w: node binding without name or uid", ErrInvalidClaims)
	}
	return nil
}

// uidGetter is the shape shared by the Lookup methods.
type uidGetter func() (uid string, ok bool, err error)

// checkLive compares an object's current UID with the token's: a missing
// object or a new UID (deleted and recreated under the same name) both
// invalidate the token.
func checkLive(kind string, r ref, get uidGetter, notFound, mismatch error) error {
	uid, ok, err := get()
	if err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrLookup, kind, r.Name, err)
	}
	if !ok {
		return fmt.Errorf("%w: %s %s", notFound, kind, r.Name)
	}
	if uid != r.UID {
		return fmt.Errorf("%w: %s %s has uid %s, token has %s", mismatch, kind, r.Name, uid, r.UID)
	}
	return nil
}

func (v *Validator) checkBindings(ctx context.Context, k *kubernetesClaims) error {
	if v.lookup == nil {
		return nil
	}
	ns := k.Namespace
	sa := k.ServiceAccount
	err := checkLive("service account", ref{Name: ns + "/" + sa.Name, UID: sa.UID},
		func() (string, bool, error) { return v.lookup.ServiceAccountUID(ctx, ns, sa.Name) },
		ErrServiceAccountNotFound, ErrServiceAccountUIDMismatch)
	if err != nil {
		return err
	}
	if k.Pod != nil {
		pod := *k.Pod
		return checkLive("pod", ref{Name: ns + "/" + pod.Name, UID: pod.UID},
			func() (string, bool, error) { return v.lookup.PodUID(ctx, ns, pod.Name) },
			ErrPodNotFound, ErrPodUIDMismatch)
	}
	// A pod-bound token's node is informational (the pod check covers it);
	// only a token bound to the node itself depends on the node.
	if nl, ok := v.lookup.(NodeLookup); ok && k.Node != nil {
		node := *k.Node
		return checkLive("node", node,
			func() (string, bool, error) { return nl.NodeUID(ctx, node.Name) },
			ErrNodeNotFound, ErrNodeUIDMismatch)
	}
	return nil
}

func userFor(c *claims) *auth.User {
	k := c.Kubernetes
	u := &auth.User{
		Name: UserName(k.Namespace, k.ServiceAccount.Name),
		UID:  k.ServiceAccount.UID,
		Groups: []string{
			auth.GroupServiceAccounts,
			auth.GroupServiceAccounts + ":" + k.Namespace,
			auth.GroupAuthenticated,
		},
		Extra: map[string][]string{},
	}
	if k.Pod != nil {
		u.Extra[ExtraPodName] = []string{k.Pod.Name}
		u.Extra[ExtraPodUID] = []string{k.Pod.UID}
	}
	if k.Node != nil {
		u.Extra[ExtraNodeName] = []string{k.Node.Name}
		u.Extra[ExtraNodeUID] = []string{k.Node.UID}
	}
	if c.ID != "" {
		u.Extra[ExtraCredentialID] = []string{"JTI=" + c.ID}
	}
	return u
}
