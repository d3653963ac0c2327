// Package s3server runs a real S3-compatible object store for tests:
// versitygw serving a temporary directory on a loopback port, with one
// bucket created and the process killed when the test ends. Stop and
// Restart let fault tests take the store away in the middle of work and
// bring it back with its objects.
//
// The versitygw binary is looked up in PATH and in $(go env GOPATH)/bin.
// Without it a test fails, saying how to install it, unless MUSTER_SKIP_S3=1
// is set, in which case it is skipped.
package s3server

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// InstallCommand is how to install the versitygw version the tests are
// written against.
const InstallCommand = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// Credentials of the store's root user. They are test values for a server
// that listens on loopback only.
const (
	AccessKey = "musteraccess"
	SecretKey = "mustersecret0123456789"
	Region    = "us-east-1"
	// Bucket is created when the server starts.
	Bucket = "muster-test"
)

// Server is a running versitygw.
type Server struct {
	t    testing.TB
	bin  string
	root string // the directory versitygw serves
	addr string // 127.0.0.1:port

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *bytes.Buffer

	buckets int // made by NewBucket
}

// Start starts versitygw on a free loopback port with an empty temporary
// directory, waits until it answers, creates Bucket, and kills the server
// when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Binary(t)
	s := &Server{t: t, bin: bin, root: t.TempDir()}
	t.Cleanup(s.Stop)
	var err error
	// Another process may take the port between choosing and binding it;
	// try a few.
	for range 3 {
		s.addr, err = freePort()
		if err != nil {
			t.Fatalf("s3server: %v", err)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("s3server: %v", err)
	}
	if err := s.makeBucket(Bucket); err != nil {
		t.Fatalf("s3server: create bucket %s: %v", Bucket, err)
	}
	return s
}

// Binary returns the path of versitygw, failing the test (or skipping it
// when MUSTER_SKIP_S3=1) if it is not installed.
func Binary(t testing.TB) string {
	t.Helper()
	if os.Getenv("MUSTER_SKIP_S3") == "1" {
		t.Skip("MUSTER_SKIP_S3=1: skipping tests that need a real S3 server")
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var tried []string
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "versitygw")
			tried = append(tried, p)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				return p
			}
		}
	}
	t.Fatalf("versitygw not found in PATH or %s: the S3 tests need a real S3 server; install it with\n\t%s\nor set MUSTER_SKIP_S3=1 to skip them", strings.Join(tried, ", "), InstallCommand)
	return ""
}

// Endpoint is the server's host:port.
func (s *Server) Endpoint() string { return s.addr }

// URL returns the spool location of prefix in Bucket, with the endpoint,
// region and plain HTTP set. Credentials come from the environment (see
// SetEnv).
func (s *Server) URL(prefix string) string { return s.BucketURL(Bucket, prefix) }

// BucketURL is URL for another bucket, such as one made by NewBucket.
func (s *Server) BucketURL(bucket, prefix string) string {
	q := url.Values{"endpoint": {s.addr}, "region": {Region}, "tls": {"false"}}
	return "s3://" + bucket + "/" + prefix + "?" + q.Encode()
}

// NewBucket creates another, empty bucket and returns its name.
func (s *Server) NewBucket() string {
	s.t.Helper()
	s.mu.Lock()
	s.buckets++
	name := fmt.Sprintf("%s-%d", Bucket, s.buckets)
	s.mu.Unlock()
	if err := s.makeBucket(name); err != nil {
		s.t.Fatalf("s3server: create bucket %s: %v", name, err)
	}
	return name
}

// SetEnv points the AWS credential variables at the server's root user for
// the rest of the test (see HideAWS for the rest).
func (s *Server) SetEnv(t testing.TB) {
	HideAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
}

// HideAWS clears, for the rest of the test, every variable that tells the
// AWS SDK where to find credentials or endpoints, points the shared files
// at files that do not exist, and turns the instance metadata service off:
// no test may read the machine's ~/.aws or send a request off loopback.
func HideAWS(t testing.TB) {
	for _, kv := range hiddenAWS(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// hiddenAWS is what HideAWS sets, as KEY=VALUE.
func hiddenAWS(t testing.TB) []string {
	var env []string
	for _, k := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
		"AWS_CA_BUNDLE",
	} {
		env = append(env, k+"=")
	}
	none := filepath.Join(t.TempDir(), "none")
	return append(env, "AWS_SHARED_CREDENTIALS_FILE="+none, "AWS_CONFIG_FILE="+none, "AWS_EC2_METADATA_DISABLED=true")
}

// Env is what SetEnv sets, as KEY=VALUE to append to a command's
// environment: for a test that runs muster side by side with others
// (t.Setenv rules out t.Parallel).
func (s *Server) Env(t testing.TB) []string {
	return append(hiddenAWS(t), "AWS_ACCESS_KEY_ID="+AccessKey, "AWS_SECRET_ACCESS_KEY="+SecretKey)
}

// EnvNames are the variables HideAWS sets, for tests that run muster with
// an environment of their own (testscript).
var EnvNames = []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_EC2_METADATA_DISABLED", "AWS_CA_BUNDLE"}

// Dir is the directory the server stores the bucket's objects in (as
// Dir()/Bucket/key), for tests that damage an object behind the server's
// back.
func (s *Server) Dir() string { return s.root }

// CPUTime is the user and system time the running server has used so
// far, from /proc (zero where there is none), for benchmarks that say
// how much of a run was the store's.
func (s *Server) CPUTime() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from 1 start after it, with utime and stime at 14 and 15.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	// /proc counts in USER_HZ, 100 a second on Linux.
	return time.Duration(utime+stime) * (time.Second / 100)
}

// Stop kills the server and waits for it to exit. Its objects stay on disk
// for Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port with the same objects.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	// The port was just released; if the kernel still holds it or
	// another process took it, wait a little and try again.
	for range 20 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("s3server: restart: %v", err)
}

// start runs versitygw and waits until it answers HTTP requests.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := &bytes.Buffer{}
	cmd := exec.Command(s.bin,
		"--port", s.addr,
		"--access", AccessKey,
		"--secret", SecretKey,
		"--region", Region,
		"--quiet",
		// Keep connections open between requests, as AWS S3 and the
		// other stores do: without it every request is a new TCP
		// connection, which is the test server's cost, not muster's.
		"--keep-alive",
		"posix", s.root)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = stopWithTest()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	deadline := time.Now().Add(15 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-done:
			return fmt.Errorf("versitygw on %s exited at start: %s", s.addr, strings.TrimSpace(log.String()))
		default:
		}
		resp, err := client.Get("http://" + s.addr + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("versitygw on %s did not answer within 15s: %v; its output: %s", s.addr, err, strings.TrimSpace(log.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.cmd, s.done, s.log = cmd, done, log
	return nil
}

// makeBucket creates bucket with a CreateBucket request (PUT /bucket),
// signed here with AWS Signature Version 4 for the root user. This is
// deliberately not the spool's own signer, which creates no buckets: the
// two agreeing with the store is a check of both.
func (s *Server) makeBucket(bucket string) error {
	const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	req, err := http.NewRequest(http.MethodPut, "http://"+s.addr+"/"+bucket, nil)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	stamp, day := now.Format("20060102T150405Z"), now.Format("20060102")
	req.Header.Set("X-Amz-Date", stamp)
	req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	canonical := strings.Join([]string{
		"PUT", "/" + bucket, "",
		"host:" + s.addr, "x-amz-content-sha256:" + emptySHA256, "x-amz-date:" + stamp, "",
		"host;x-amz-content-sha256;x-amz-date", emptySHA256,
	}, "\n")
	sum := sha256.Sum256([]byte(canonical))
	scope := day + "/" + Region + "/s3/aws4_request"
	key := []byte("AWS4" + SecretKey)
	for _, part := range []string{day, Region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	sig := hmacSHA256(key, "AWS4-HMAC-SHA256\n"+stamp+"\n"+scope+"\n"+hex.EncodeToString(sum[:]))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+AccessKey+"/"+scope+
		",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="+hex.EncodeToString(sig))
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode == http.StatusOK || bytes.Contains(body, []byte("<Code>BucketAlreadyOwnedByYou</Code>")) {
		return nil
	}
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// freePort returns a loopback address with a port nobody listens on.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	addr := l.Addr().String()
	if addr == "" {
		return "", errors.New("no loopback port")
	}
	return addr, nil
}
