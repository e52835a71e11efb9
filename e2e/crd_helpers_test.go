package e2e

// Helpers of crd_conversion_test.go: the webhook's serving certificate,
// the manifests of the webhook and the CRD, and bounded API calls.

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os/exec"
	"strings"
	"testing"
	"time"

	"skiff/e2e/testimages"
	"skiff/e2e/testimages/testpki"
)

// ccServingPair is a serving certificate for dnsName signed by ca, and its
// key, both PEM, as a kubernetes.io/tls Secret holds them. testpki.Issue
// only names 127.0.0.1 and localhost; the API server verifies a Service
// webhook as <service>.<namespace>.svc, so the name must be a SAN.
func ccServingPair(t *testing.T, ca *testpki.CA, dnsName string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(ca.Key.Curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
		DNSNames: []string{dnsName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func ccB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// ccWebhookManifests are webhookPodManifests for crdconvert.
func ccWebhookManifests(ref, node string, certPEM, keyPEM []byte) string {
	return webhookPodManifests(ccNS, ccSvc, ref, node, certPEM, keyPEM)
}

// webhookPodManifests are the namespace ns, the TLS Secret, the webhook pod
// svc bound to node (the Secret mounted at /certs, where the test webhooks
// read it by default) and the Service svc, port ccSvcPort to the pod's
// ccPodPort.
func webhookPodManifests(ns, svc, ref, node string, certPEM, keyPEM []byte) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Secret
metadata: {name: %[2]s-tls, namespace: %[1]s}
type: kubernetes.io/tls
data:
  tls.crt: %[3]s
  tls.key: %[4]s
---
apiVersion: v1
kind: Pod
metadata: {name: %[2]s, namespace: %[1]s, labels: {app: %[2]s}}
spec:
  nodeName: %[5]s
  terminationGracePeriodSeconds: 2
  volumes: [{name: certs, secret: {secretName: %[2]s-tls}}]
  containers:
  - name: webhook
    image: %[6]s
    imagePullPolicy: Never
    args: [--port=%[7]d]
    ports: [{name: https, containerPort: %[7]d}]
    volumeMounts: [{name: certs, mountPath: /certs, readOnly: true}]
    readinessProbe: {httpGet: {path: /readyz, port: %[7]d, scheme: HTTPS}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {app: %[2]s}
  ports: [{name: https, port: %[8]d, targetPort: https}]
`, ns, svc, ccB64(certPEM), ccB64(keyPEM), node, ref, ccPodPort, ccSvcPort)
}

// ccCRD is widgets.stable.skiff.test: v1 (storage) keeps spec.hostPort,
// v2 spec.host and spec.port, converted by the webhook behind ccSvc.
func ccCRD(caPEM []byte) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[1]s}
spec:
  group: %[2]s
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        caBundle: %[3]s
        service: {namespace: %[4]s, name: %[5]s, path: /convert, port: %[6]d}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              hostPort: {type: string}
  - name: v2
    served: true
    storage: false
    additionalPrinterColumns:
    - {name: Host, type: string, jsonPath: .spec.host}
    - {name: Port, type: integer, jsonPath: .spec.port}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              host: {type: string}
              port: {type: integer}
`, ccCRDName, ccGroup, ccB64(caPEM), ccNS, ccSvc, ccSvcPort)
}

// ccImport imports the image into the server node's embedded containerd
// (`skiff images import`), retrying while its socket is not up yet.
func ccImport(t *testing.T, c *netCluster, img testimages.Image) {
	t.Helper()
	var out []byte
	lcWait(t, c, time.Minute, time.Second, "skiff images import "+img.Ref, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		out, err = exec.CommandContext(ctx, skiffBin, "images", "import", "--data-dir", c.server.DataDir, img.Path).CombinedOutput()
		return err == nil, fmt.Sprintf("%v: %s", err, out)
	})
	mustContain(t, "skiff images import", string(out), "imported "+img.Ref)
}

// ccBound is how long one API call of the test may take: far less than
// the API server's 30 s conversion webhook timeout, so that a server
// waiting out that timeout (a hang, as the caller sees it) fails the
// test, while any answer the server gives at once passes easily.
const ccBound = 15 * time.Second

// ccCall runs call with a context bounded by ccBound and returns its error
// and how long it took; a call that runs into the bound fails the test.
func ccCall(t *testing.T, what string, call func(ctx context.Context) error) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ccBound)
	defer cancel()
	begin := time.Now()
	err := call(ctx)
	took := time.Since(begin)
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("%s: no answer within %v (%v): the API server hangs instead of failing", what, ccBound, err)
	}
	return took, err
}

// ccReadyEndpoints counts the ready endpoints of the webhook Service.
func ccReadyEndpoints(t *testing.T, c *netCluster) (int, string) {
	t.Helper()
	return readyEndpointsOf(t, c, ccNS, ccSvc)
}

// readyEndpointsOf counts the ready endpoints of Service ns/svc, and
// lists them for a failure message.
func readyEndpointsOf(t *testing.T, c *netCluster, ns, svc string) (int, string) {
	t.Helper()
	out := lcKubectl(t, c, "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name="+svc,
		"-o", `jsonpath={range .items[*].endpoints[*]}{.addresses[0]} ready={.conditions.ready}{"\n"}{end}`)
	n := 0
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if strings.HasSuffix(line, "ready=true") {
			n++
		}
	}
	return n, out
}
