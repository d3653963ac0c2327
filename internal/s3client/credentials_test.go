package s3client_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/s3client"
	"github.com/muster-tool/muster/internal/testutil/s3server"
)

// storeWith starts a real S3 store (versitygw) and hides every AWS
// setting of the machine: each test then sets only the source it checks.
func storeWith(t *testing.T) *s3server.Server {
	t.Helper()
	srv := s3server.Start(t)
	s3server.HideAWS(t)
	return srv
}

// roundTrip writes an object through a client that finds its own
// credentials and reads it back. versitygw checks every request's
// signature against its root user's keys, so a round trip that works
// means the credentials came through whole from the source under test.
func roundTrip(t *testing.T, srv *s3server.Server) error {
	t.Helper()
	c, err := s3client.New(s3client.Config{Bucket: s3server.Bucket, Endpoint: srv.Endpoint(), Region: s3server.Region, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	key := "creds/" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if err := c.PutIfAbsent(t.Context(), key, []byte("x")); err != nil {
		return err
	}
	got, err := c.Get(t.Context(), key, 10)
	if err == nil && string(got) != "x" {
		err = fmt.Errorf("read back %q, want %q", got, "x")
	}
	return err
}

func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCredentialsEnvironment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
func TestCredentialsEnvironment(t *testing.T) {
	srv := storeWith(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3server.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3server.SecretKey)
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with keys in the environment: %v", err)
	}
}

// TestCredentialsConfigProfile: keys in a profile of the shared config
// file (~/.aws/config names profiles "profile NAME"), chosen with
// AWS_PROFILE; another profile's keys are not used.
func TestCredentialsConfigProfile(t *testing.T) {
	srv := storeWith(t)
	t.Setenv("AWS_CONFIG_FILE", writeFile(t, "config", fmt.Sprintf(
		"[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[profile muster]\naws_access_key_id = %s\naws_secret_access_key = %s\n",
		s3server.AccessKey, s3server.SecretKey), 0o600))
	t.Setenv("AWS_PROFILE", "muster")
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with profile muster of ~/.aws/config: %v", err)
	}
	t.Setenv("AWS_PROFILE", "")
	var refused *s3client.Error
	if err := roundTrip(t, srv); !errors.As(err, &refused) {
		t.Errorf("with the default profile's wrong keys: %v, want the store to refuse them", err)
	}
}

// TestCredentialsProcess: a profile of ~/.aws/config whose
// credential_process prints the keys as JSON (a real program, run as the
// AWS tools run it), and a credential_process that fails.
func TestCredentialsProcess(t *testing.T) {
	srv := storeWith(t)
	dir := t.TempDir()
	ok := writeFile(t, "creds.sh", fmt.Sprintf(
		"#!/bin/sh\necho \"$1\" > %s/ran\nprintf '{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"%s\"}\\n'\n",
		dir, s3server.AccessKey, s3server.SecretKey), 0o755)
	bad := writeFile(t, "bad.sh", "#!/bin/sh\nexit 3\n", 0o755)
	t.Setenv("AWS_CONFIG_FILE", writeFile(t, "config", fmt.Sprintf(
		"[profile vault]\ncredential_process = %s muster-host\n\n[profile broken]\ncredential_process = %s\n", ok, bad), 0o600))

	t.Setenv("AWS_PROFILE", "vault")
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with credential_process: %v", err)
	}
	if ran, err := os.ReadFile(filepath.Join(dir, "ran")); err != nil || string(ran) != "muster-host\n" {
		t.Errorf("credential_process ran with %q, %v; want its argument muster-host", ran, err)
	}

	t.Setenv("AWS_PROFILE", "broken")
	err := roundTrip(t, srv)
	var ce *s3client.CredentialsError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "credential_process") || s3client.Retryable(err) {
		t.Errorf("with a credential_process that fails: %v, want a CredentialsError naming credential_process, not to be retried", err)
	}
}

// TestCredentialsIMDSv2: an instance's role credentials from the instance
// metadata service, asked the IMDSv2 way.
//
// This is a stub, not the real service: the instance metadata service
// exists only inside a cloud instance, so none can run here. It serves the
// documented IMDSv2 endpoints on loopback as an instance that requires
// IMDSv2 does: PUT /latest/api/token gives a session token for the TTL
// asked in X-aws-ec2-metadata-token-ttl-seconds; GET
// /latest/meta-data/iam/security-credentials/ lists the role and GET
// .../security-credentials/ROLE gives its keys, each only with that token
// in X-aws-ec2-metadata-token (401 without, as IMDSv1 requests get there).
// The keys it hands out are the store's own, without the session token
// the real service adds: versitygw refuses a session token it did not
// mint itself.
func TestCredentialsIMDSv2(t *testing.T) {
	srv := storeWith(t)
	const token, role = "AQAEAIMDSv2-session-token==", "muster-host-role"
	var tokens, roleReads, keyReads atomic.Int64
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			if r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") == "" {
				http.Error(w, "missing TTL", http.StatusBadRequest)
				return
			}
			tokens.Add(1)
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", r.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
			fmt.Fprint(w, token)
			return
		}
		if r.Method != http.MethodGet {
			http.Error(w, "", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("X-Aws-Ec2-Metadata-Token") != token {
			http.Error(w, "", http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/latest/meta-data/iam/security-credentials/":
			roleReads.Add(1)
			fmt.Fprintln(w, role)
		case "/latest/meta-data/iam/security-credentials/" + role:
			keyReads.Add(1)
			fmt.Fprintf(w, `{"Code": "Success", "LastUpdated": %q, "Type": "AWS-HMAC", "AccessKeyId": %q, "SecretAccessKey": %q, "Token": "", "Expiration": %q}`,
				time.Now().UTC().Format(time.RFC3339), s3server.AccessKey, s3server.SecretKey, time.Now().Add(6*time.Hour).UTC().Format(time.RFC3339))
		default:
			http.NotFound(w, r)
		}
	}))
	defer stub.Close()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", stub.URL)
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with the instance's role: %v", err)
	}
	if tokens.Load() == 0 || roleReads.Load() == 0 || keyReads.Load() == 0 {
		t.Errorf("metadata service asked for %d tokens, %d role lists, %d keys; want the IMDSv2 sequence", tokens.Load(), roleReads.Load(), keyReads.Load())
	}
}

// stsStub stands in for AWS STS on loopback.
//
// This is a stub, not the real service: STS exists only at AWS. It
// answers the documented query API (a form POST with Action and
// Version=2011-06-15) for AssumeRoleWithWebIdentity and AssumeRole with
// the store's keys, once check accepts the form; anything else is 400.
// As in the metadata stub, the keys come without a session token, which
// versitygw would refuse.
func stsStub(t *testing.T, check func(r *http.Request) error) (url string, calls *atomic.Int64) {
	calls = new(atomic.Int64)
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("Version") != "2011-06-15" {
			http.Error(w, "want a query API POST", http.StatusBadRequest)
			return
		}
		if err := check(r); err != nil {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>%s</Message></Error></ErrorResponse>`, err)
			return
		}
		action := r.PostForm.Get("Action")
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<%sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><%sResult>`+
			`<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><Expiration>%s</Expiration></Credentials>`+
			`<AssumedRoleUser><AssumedRoleId>AROA:muster</AssumedRoleId><Arn>%s</Arn></AssumedRoleUser>`+
			`</%sResult><ResponseMetadata><RequestId>c6104cbe</RequestId></ResponseMetadata></%sResponse>`,
			action, action, s3server.AccessKey, s3server.SecretKey, time.Now().Add(time.Hour).UTC().Format(time.RFC3339), r.PostForm.Get("RoleArn"), action, action)
	}))
	t.Cleanup(stub.Close)
	return stub.URL, calls
}

// TestCredentialsWebIdentity: AWS_WEB_IDENTITY_TOKEN_FILE with
// AWS_ROLE_ARN (as Kubernetes sets them for a service account): the
// token is traded for keys with STS AssumeRoleWithWebIdentity.
func TestCredentialsWebIdentity(t *testing.T) {
	srv := storeWith(t)
	const arn, jwt = "arn:aws:iam::123456789012:role/muster-host", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJtdXN0ZXIifQ.c2ln"
	url, calls := stsStub(t, func(r *http.Request) error {
		f := r.PostForm
		if f.Get("Action") != "AssumeRoleWithWebIdentity" || f.Get("RoleArn") != arn || f.Get("WebIdentityToken") != jwt || f.Get("RoleSessionName") != "web-1" {
			return fmt.Errorf("unexpected request %v", f)
		}
		return nil
	})
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", writeFile(t, "token", jwt, 0o600))
	t.Setenv("AWS_ROLE_ARN", arn)
	t.Setenv("AWS_ROLE_SESSION_NAME", "web-1")
	t.Setenv("AWS_ENDPOINT_URL_STS", url)
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with a web identity: %v", err)
	}
	if calls.Load() != 1 {
		t.Errorf("STS asked %d times for two requests, want once: the keys are kept until they expire", calls.Load())
	}
}

// TestCredentialsAssumeRoleProfile: a profile of ~/.aws/config with
// role_arn and source_profile: the source profile's keys sign STS
// AssumeRole, whose keys sign the requests.
func TestCredentialsAssumeRoleProfile(t *testing.T) {
	srv := storeWith(t)
	const arn = "arn:aws:iam::123456789012:role/muster-deploy"
	url, _ := stsStub(t, func(r *http.Request) error {
		if r.PostForm.Get("Action") != "AssumeRole" || r.PostForm.Get("RoleArn") != arn {
			return fmt.Errorf("unexpected request %v", r.PostForm)
		}
		if !strings.Contains(r.Header.Get("Authorization"), "Credential=AKIABASEPROFILE/") {
			return fmt.Errorf("AssumeRole not signed with the source profile's keys: %q", r.Header.Get("Authorization"))
		}
		return nil
	})
	t.Setenv("AWS_CONFIG_FILE", writeFile(t, "config", fmt.Sprintf(
		"[profile deploy]\nrole_arn = %s\nsource_profile = base\n\n[profile base]\naws_access_key_id = AKIABASEPROFILE\naws_secret_access_key = basesecret\n", arn), 0o600))
	t.Setenv("AWS_PROFILE", "deploy")
	t.Setenv("AWS_ENDPOINT_URL_STS", url)
	if err := roundTrip(t, srv); err != nil {
		t.Fatalf("with profile deploy assuming a role: %v", err)
	}
}

// TestCABundle: AWS_CA_BUNDLE names the CAs a store behind a private CA
// is trusted by, as the AWS tools read it; without it, that store's
// certificate is refused. The store here answers only HEAD: what is
// under test is the TLS connection, not the protocol.
func TestCABundle(t *testing.T) {
	s3server.HideAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	store := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1")
	}))
	store.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is expected
	store.StartTLS()
	defer store.Close()
	head := func() error {
		c, err := s3client.New(s3client.Config{Bucket: "bucket", Endpoint: strings.TrimPrefix(store.URL, "https://"), Region: "us-east-1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Head(t.Context(), "a")
		return err
	}
	if err := head(); err == nil || !strings.Contains(s3client.Describe(err), "certificate") {
		t.Errorf("a store with a certificate of an unknown CA: %v, want it refused", err)
	}
	pem := "-----BEGIN CERTIFICATE-----\n" + base64.StdEncoding.EncodeToString(store.Certificate().Raw) + "\n-----END CERTIFICATE-----\n"
	t.Setenv("AWS_CA_BUNDLE", writeFile(t, "ca.pem", pem, 0o644))
	if err := head(); err != nil {
		t.Errorf("with the store's CA in AWS_CA_BUNDLE: %v", err)
	}
}
