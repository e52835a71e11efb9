// Package certsigning issues the certificates of the built-in signers
// (upstream's CSR signing controller) and approves kubelet client
// certificates automatically (upstream's CSR approving controller).
//
// Approved CertificateSigningRequests for kubernetes.io/kube-apiserver-client,
// kubernetes.io/kube-apiserver-client-kubelet and kubernetes.io/kubelet-serving
// are checked against their signer's rules and signed with the cluster CA;
// a request breaking the rules is marked Failed instead. Pending requests
// for kubelet client certificates are approved when a node renews its own
// certificate or a trusted requester (the join flow) asks.
package certsigning

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"skiff/server/controller/worker"
)

// DefaultDuration is how long issued certificates live unless the
// request asks for less (upstream's --cluster-signing-duration).
const DefaultDuration = 365 * 24 * time.Hour

// Event reasons and condition reasons.
const (
	ReasonAutoApproved            = "AutoApproved"
	ReasonSignerValidationFailure = "SignerValidationFailure"
	ReasonCertificateIssued       = "CertificateIssued"
	ReasonSigningFailed           = "SigningFailed"
)

// Config wires the controller.
type Config struct {
	Client kubernetes.Interface
	// Informers is shared with the other controllers; the CSR informer is
	// taken from it.
	Informers informers.SharedInformerFactory
	// Recorder records the Events kubectl describe csr shows (none when
	// nil).
	Recorder record.EventRecorder
	Logger   *slog.Logger
	// CACert and CAKey are the cluster CA every built-in signer signs
	// with (required).
	CACert *x509.Certificate
	CAKey  crypto.Signer
	// Duration is the longest life of an issued certificate (default one
	// year); spec.expirationSeconds may ask for less, and no certificate
	// outlives the CA.
	Duration time.Duration
	// AutoApproveUsers are requesters whose kubelet client certificate
	// requests are approved without review (default none); the join flow
	// requests as one of them.
	AutoApproveUsers []string
	// AutoApproveGroups are the same for requesters in these groups
	// (default none), e.g. "system:bootstrappers" for bootstrap tokens.
	AutoApproveGroups []string
}

type controller struct {
	client    kubernetes.Interface
	recorder  record.EventRecorder
	log       *slog.Logger
	csrs      certlisters.CertificateSigningRequestLister
	ca        *ca
	duration  time.Duration
	approvers approvers
	now       func() time.Time
}

// Run approves and signs CSRs until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	c, err := newController(cfg)
	if err != nil {
		return err
	}
	q := worker.New(worker.Config{Name: "certsigning", Log: c.log, Message: "certificate signing request", Noun: "csr"})
	defer q.ShutDown()
	synced, unsubscribe, err := worker.Subscribe(worker.Subscription{
		Informer: cfg.Informers.Certificates().V1().CertificateSigningRequests().Informer(),
		Handler:  cache.ResourceEventHandlerFuncs{AddFunc: q.Enqueue, UpdateFunc: q.EnqueueUpdate},
	})
	if err != nil {
		return fmt.Errorf("certsigning: watch CSRs: %w", err)
	}
	defer unsubscribe()
	cfg.Informers.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return ctx.Err()
	}
	q.Run(ctx, 1, c.sync)
	return nil
}

func newController(cfg Config) (*controller, error) {
	if cfg.Client == nil || cfg.Informers == nil {
		return nil, errors.New("certsigning: Client and Informers are required")
	}
	if cfg.CACert == nil || cfg.CAKey == nil {
		return nil, errors.New("certsigning: CACert and CAKey are required")
	}
	if pub, ok := cfg.CAKey.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(cfg.CACert.PublicKey) {
		return nil, errors.New("certsigning: CAKey is not the key of CACert")
	}
	c := &controller{
		client:    cfg.Client,
		recorder:  cfg.Recorder,
		log:       cfg.Logger,
		csrs:      cfg.Informers.Certificates().V1().CertificateSigningRequests().Lister(),
		ca:        &ca{cert: cfg.CACert, key: cfg.CAKey},
		duration:  cfg.Duration,
		approvers: approvers{users: sets.New(cfg.AutoApproveUsers...), groups: sets.New(cfg.AutoApproveGroups...)},
		now:       time.Now,
	}
	if c.duration <= 0 {
		c.duration = DefaultDuration
	}
	if c.recorder == nil {
		c.recorder = &record.FakeRecorder{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// sync moves one CSR on: a pending one may be approved, an approved one
// for our signers is signed or failed. Issued, denied and failed ones are
// done.
func (c *controller) sync(ctx context.Context, name string) error {
	cached, err := c.csrs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get CSR %s: %w", name, err)
	}
	if len(cached.Status.Certificate) > 0 || hasFailed(cached) {
		return nil
	}
	approved, denied := approvalState(cached)
	switch {
	case !approved && !denied:
		return c.approve(ctx, cached.DeepCopy())
	case approved && slices.Contains(signers, cached.Spec.SignerName):
		return c.sign(ctx, cached.DeepCopy())
	}
	return nil
}

func (c *controller) approve(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
	req, err := parseRequest(csr.Spec.Request)
	if err != nil {
		return nil // not a kubelet's request; it waits for a person
	}
	ok, msg := c.approvers.approve(csr, req)
	if !ok {
		return nil
	}
	now := metav1.NewTime(c.now())
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: ReasonAutoApproved, Message: msg,
		LastUpdateTime: now, LastTransitionTime: now,
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("approve CSR %s: %w", csr.Name, err)
	}
	c.log.Info("approved CSR", "csr", csr.Name, "requester", csr.Spec.Username)
	c.recorder.Event(csr, corev1.EventTypeNormal, ReasonAutoApproved, msg)
	return nil
}

func (c *controller) sign(ctx context.Context, csr *certv1.CertificateSigningRequest) error {
	req, err := parseRequest(csr.Spec.Request)
	if err == nil {
		err = checkSigner(csr.Spec.SignerName, req, csr.Spec.Usages)
	}
	if err != nil {
		return c.fail(ctx, csr, err.Error())
	}
	pemCert, cert, err := c.ca.sign(req, csr.Spec.Usages, duration(c.duration, csr.Spec.ExpirationSeconds), c.now())
	if err != nil {
		c.recorder.Eventf(csr, corev1.EventTypeWarning, ReasonSigningFailed, "Signing failed: %v", err)
		return fmt.Errorf("sign CSR %s: %w", csr.Name, err)
	}
	csr.Status.Certificate = pemCert
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("write certificate of CSR %s: %w", csr.Name, err)
	}
	c.log.Info("issued certificate", "csr", csr.Name, "subject", cert.Subject.String(), "notAfter", cert.NotAfter)
	c.recorder.Eventf(csr, corev1.EventTypeNormal, ReasonCertificateIssued, "Issued certificate for %q, valid until %s", cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// fail marks a CSR Failed: the request can never be signed as it is, so
// it is not retried.
func (c *controller) fail(ctx context.Context, csr *certv1.CertificateSigningRequest, msg string) error {
	now := metav1.NewTime(c.now())
	csr.Status.Conditions = append(csr.Status.Conditions, certv1.CertificateSigningRequestCondition{
		Type: certv1.CertificateFailed, Status: corev1.ConditionTrue, Reason: ReasonSignerValidationFailure, Message: msg,
		LastUpdateTime: now, LastTransitionTime: now,
	})
	if _, err := c.client.CertificatesV1().CertificateSigningRequests().UpdateStatus(ctx, csr, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("mark CSR %s failed: %w", csr.Name, err)
	}
	c.log.Info("CSR failed the signer's rules", "csr", csr.Name, "signer", csr.Spec.SignerName, "reason", msg)
	c.recorder.Event(csr, corev1.EventTypeWarning, ReasonSignerValidationFailure, msg)
	return nil
}
