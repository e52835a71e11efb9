package jointoken

// Paths of the join protocol on the API server's HTTPS port.
const (
	// CACertsPath serves the CA bundle PEM without authentication.
	CACertsPath = "/cacerts"
	// NodeCertsPath exchanges a join token (or a valid node client
	// certificate, for renewal) for a node's certificates.
	NodeCertsPath = "/v1-skiff/node-certs"
)

// NodeCertsRequest is the JSON body of a POST to NodeCertsPath.
type NodeCertsRequest struct {
	// NodeName is the node the certificates are for.
	NodeName string `json:"nodeName"`
	// NodePassword is the node's own random password: the first join of a
	// name records it, later joins of that name must present it. A renewal
	// authenticated by the node's client certificate need not send it.
	NodePassword string `json:"nodePassword,omitempty"`
	// ClientCSR is a PEM CERTIFICATE REQUEST for the node's client
	// certificate; its subject is ignored (the server sets
	// system:node:<name>, system:nodes).
	ClientCSR string `json:"clientCSR"`
	// ServingCSR is a PEM CERTIFICATE REQUEST for the node's serving
	// certificate, carrying the node's addresses and host names as SANs.
	ServingCSR string `json:"servingCSR"`
}

// NodeCertsResponse is the answer to a successful NodeCertsRequest.
type NodeCertsResponse struct {
	// ClientCert is the PEM client certificate (CN system:node:<name>, O
	// system:nodes).
	ClientCert string `json:"clientCert"`
	// ServingCert is the PEM serving certificate.
	ServingCert string `json:"servingCert"`
	// CACert is the CA bundle PEM, as served at CACertsPath.
	CACert string `json:"caCert"`
}

// Paths of the server join protocol: a server started with --server and
// the server token fetches the cluster's shared secrets, then asks to
// become a member of the embedded store. Only the server token's secret
// is accepted on them (a bootstrap token or a node certificate is not).
const (
	// ServerBootstrapPath (POST) answers a ServerBootstrapResponse.
	ServerBootstrapPath = "/v1-skiff/server-bootstrap"
	// ServerJoinPath (POST a ServerJoinRequest) adds the caller as a
	// voting member of the Raft store.
	ServerJoinPath = "/v1-skiff/server-join"
)

// ServerBootstrapResponse carries what every server of a cluster shares,
// as k3s servers share their bootstrap data: the cluster CA and its key,
// the service-account signing key, the front-proxy CA; by file name in
// the server's TLS directory.
type ServerBootstrapResponse struct {
	Files map[string][]byte `json:"files"`
}

// ServerJoinRequest names the joining server's member: its ID (the node
// name) and the host:port of its Raft transport.
type ServerJoinRequest struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}
