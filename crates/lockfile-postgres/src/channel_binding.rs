//! `tls-server-end-point` channel binding (RFC 5929 §4.1), for
//! SCRAM-SHA-256-PLUS: the hash of the server's certificate, taken with the
//! hash of the certificate's own signature algorithm (SHA-256 for MD5 and
//! SHA-1), as the server computes it. A password exchange bound so fails
//! through a man in the middle even where the certificate is not verified.
//!
//! Only the certificate's `signatureAlgorithm` is read, by walking three
//! DER headers; an algorithm without a hash of its own (Ed25519, RSA-PSS)
//! gives no binding, and SCRAM then goes on without it unless
//! `channel_binding=require` says otherwise.

use ring::digest;

const SEQUENCE: u8 = 0x30;
const OBJECT_IDENTIFIER: u8 = 0x06;
/// 1.2.840.113549.1.1: PKCS #1 (…WithRSAEncryption).
const PKCS1: [u8; 8] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
/// 1.2.840.10045.4.1: ecdsa-with-SHA1.
const ECDSA_SHA1: [u8; 7] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
/// 1.2.840.10045.4.3: ecdsa-with-SHA2 (…SHA256, …SHA384, …SHA512).
const ECDSA_SHA2: [u8; 7] = [0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];

/// The binding data for the server certificate `cert` (DER), if its
/// signature algorithm names a hash.
pub(crate) fn tls_server_end_point(cert: &[u8]) -> Option<Vec<u8>> {
    let (SEQUENCE, certificate, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, _tbs, rest) = element(certificate)? else {
        return None;
    };
    let (SEQUENCE, algorithm, _) = element(rest)? else {
        return None;
    };
    let (OBJECT_IDENTIFIER, oid, _) = element(algorithm)? else {
        return None;
    };
    Some(digest::digest(hash_of(oid)?, cert).as_ref().to_vec())
}

/// The hash that binds a certificate signed with the algorithm `oid`.
fn hash_of(oid: &[u8]) -> Option<&'static digest::Algorithm> {
    if let Some(last) = oid.strip_prefix(&PKCS1[..]) {
        return match last {
            // md5WithRSA and sha1WithRSA are bound with SHA-256.
            [4 | 5 | 11] => Some(&digest::SHA256),
            [12] => Some(&digest::SHA384),
            [13] => Some(&digest::SHA512),
            _ => None,
        };
    }
    if oid == ECDSA_SHA1 {
        return Some(&digest::SHA256);
    }
    match oid.strip_prefix(&ECDSA_SHA2[..])? {
        [2] => Some(&digest::SHA256),
        [3] => Some(&digest::SHA384),
        [4] => Some(&digest::SHA512),
        _ => None,
    }
}

/// One DER element of `der`: its tag, its contents, and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |len, &b| len << 8 | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A certificate's outline: an empty to-be-signed part, the algorithm
    /// `oid`, an empty signature.
    fn outline(oid: &[u8]) -> Vec<u8> {
        let mut algorithm = vec![OBJECT_IDENTIFIER, oid.len() as u8];
        algorithm.extend_from_slice(oid);
        let mut body = vec![SEQUENCE, 0, SEQUENCE, algorithm.len() as u8];
        body.extend(algorithm);
        body.extend([0x03, 0x01, 0x00]);
        // A long-form length, as real certificates have.
        let mut cert = vec![SEQUENCE, 0x81, body.len() as u8];
        cert.extend(body);
        cert
    }

    #[test]
    fn the_hash_follows_the_signature_algorithm() {
        let sha256_rsa = outline(&[PKCS1.as_slice(), &[11]].concat());
        let bound = tls_server_end_point(&sha256_rsa).unwrap();
        assert_eq!(bound, digest::digest(&digest::SHA256, &sha256_rsa).as_ref());
        let sha1_rsa = outline(&[PKCS1.as_slice(), &[5]].concat());
        assert_eq!(tls_server_end_point(&sha1_rsa).unwrap().len(), 32);
        let sha384_ecdsa = outline(&[ECDSA_SHA2.as_slice(), &[3]].concat());
        assert_eq!(tls_server_end_point(&sha384_ecdsa).unwrap().len(), 48);
        let sha512_rsa = outline(&[PKCS1.as_slice(), &[13]].concat());
        assert_eq!(tls_server_end_point(&sha512_rsa).unwrap().len(), 64);
        // Ed25519 (1.3.101.112) names no hash: no binding.
        assert_eq!(tls_server_end_point(&outline(&[0x2b, 0x65, 0x70])), None);
        // Truncated or not a certificate at all.
        assert_eq!(tls_server_end_point(&sha256_rsa[..10]), None);
        assert_eq!(tls_server_end_point(b"not der"), None);
    }
}
