package storage

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"skiff/server/registry"
	"skiff/store"
)

// Upstream's messages for a continue token whose snapshot was compacted.
const (
	continueExpired = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter."
	inconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response to " +
		"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
		"objects that were created, modified, or deleted between the time the first chunk was returned and now may " +
		"show up in the list."
)

// ListError maps an error of a paged store List to the API error. A
// continue token whose snapshot is compacted gets upstream's answer: 410
// Expired carrying a new token that resumes at the same key in the current
// snapshot, so the client may finish an inconsistent list instead of
// starting over. The key is the first one not yet returned: nothing is
// listed twice.
func (s *Storage) ListError(ctx context.Context, err error, res *registry.Resource, prefix, token string) error {
	if token == "" || !errors.Is(err, store.ErrCompacted) {
		return APIError(err, res, "")
	}
	_, start, derr := store.DecodeContinue(token, prefix)
	if derr != nil {
		return apierrors.NewResourceExpired(continueExpired)
	}
	rev, rerr := s.st.CurrentRevision(ctx)
	if rerr != nil {
		return apierrors.NewResourceExpired(continueExpired)
	}
	st := apierrors.NewResourceExpired(inconsistentContinue)
	st.ErrStatus.ListMeta.Continue = store.EncodeContinue(rev, start)
	return st
}
