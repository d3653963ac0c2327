package s3client

import (
	"cmp"
	"context"
	"crypto/x509"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/smithy-go/logging"
)

// awsConfig returns the SDK configuration requests are made with: the
// configured keys alone, else the shared configuration, whose credentials
// come from the AWS SDK's default chain, which looks where the AWS CLI
// looks, in this order:
//
//   - AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN;
//   - AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN: the token is traded
//     for keys with STS AssumeRoleWithWebIdentity (Kubernetes service
//     accounts, CI systems' OIDC tokens);
//   - the profile AWS_PROFILE (default "default") of the shared config
//     file (AWS_CONFIG_FILE, ~/.aws/config) and the shared credentials
//     file (AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials): static keys,
//     credential_process, role_arn with source_profile or
//     web_identity_token_file, SSO;
//   - a container's credentials endpoint (AWS_CONTAINER_CREDENTIALS_*);
//   - the instance metadata service (IMDSv2, falling back to IMDSv1; its
//     address AWS_EC2_METADATA_SERVICE_ENDPOINT, off with
//     AWS_EC2_METADATA_DISABLED=true).
//
// Keys that expire are fetched again before they do. Loading the chain
// reads the shared files; asking a source (running a credential_process,
// calling STS or the metadata service) happens on the first request. The
// shared configuration also says whether to use FIPS or dual-stack
// endpoints at AWS, and may name a CA bundle (AWS_CA_BUNDLE or the
// profile's ca_bundle) for a store behind a private CA.
func (c *Client) awsConfig(ctx context.Context) (aws.Config, error) {
	if c.cfg.AccessKey != "" {
		return aws.Config{Credentials: credentials.NewStaticCredentialsProvider(c.cfg.AccessKey, c.cfg.SecretKey, c.cfg.SessionToken)}, nil
	}
	awsCfg, err := config.LoadDefaultConfig(ctx,
		// STS needs a region when nothing names one.
		config.WithDefaultRegion(cmp.Or(c.cfg.Region, "us-east-1")),
		config.WithLogger(logging.Nop{}),
	)
	if err != nil {
		return aws.Config{}, &CredentialsError{err}
	}
	awsCfg.Credentials = marked{awsCfg.Credentials}
	return awsCfg, nil
}

// caBundle returns the pool of the CA bundle the SDK configuration named,
// or nil.
func caBundle(awsCfg aws.Config) *x509.CertPool {
	if bc, ok := awsCfg.HTTPClient.(*awshttp.BuildableClient); ok {
		if tc := bc.GetTransport().TLSClientConfig; tc != nil {
			return tc.RootCAs
		}
	}
	return nil
}

// CredentialsError is credentials that could not be found or fetched:
// no source has any, a profile is missing, a credential_process failed,
// STS or the metadata service refused.
type CredentialsError struct{ Err error }

func (e *CredentialsError) Error() string { return "could not get credentials: " + e.Err.Error() }
func (e *CredentialsError) Unwrap() error { return e.Err }

// marked is a credentials provider whose failures are *CredentialsError,
// so that they can be told from the store's answers.
type marked struct{ aws.CredentialsProvider }

func (m marked) Retrieve(ctx context.Context) (aws.Credentials, error) {
	v, err := m.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return v, &CredentialsError{err}
	}
	return v, nil
}
