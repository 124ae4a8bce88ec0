"""A relay's side of docs/secrets.md, written from the document alone, with no HPKE library:
RFC 9180 base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-256-GCM, from the `cryptography`
primitives (X25519, HMAC, AES-GCM).

  keygen                       -> {"privateKey": hex, "publicKey": base64url}
  open <json on stdin>         -> {"value": base64url}
     stdin: {"privateKey": hex, "sealed": ISealedSecret, "binding": the binding to open it as}
"""
import base64
import hashlib
import hmac
import json
import sys

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives import serialization

INFO = b"serve.zone/cloudly/sealed-secret/v1"
KEM_SUITE = b"KEM" + (0x0020).to_bytes(2, "big")
HPKE_SUITE = b"HPKE" + (0x0020).to_bytes(2, "big") + (0x0001).to_bytes(2, "big") + (0x0002).to_bytes(2, "big")


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(data):
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def extract(salt, ikm):
    return hmac.new(salt if salt else b"\x00" * 32, ikm, hashlib.sha256).digest()


def expand(prk, info, length):
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def labeled_extract(suite, salt, label, ikm):
    return extract(salt, b"HPKE-v1" + suite + label + ikm)


def labeled_expand(suite, prk, label, info, length):
    return expand(prk, length.to_bytes(2, "big") + b"HPKE-v1" + suite + label + info, length)


def additional_data(binding):
    # RFC 8785 for these values (ids, integers, null): members sorted, no whitespace.
    return INFO + b"\n" + json.dumps(binding, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def open_sealed(private_hex, sealed, binding):
    assert sealed["suite"] == "hpke-base-x25519-hkdfsha256-aes256gcm"
    sk = X25519PrivateKey.from_private_bytes(bytes.fromhex(private_hex))
    pk_r = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    enc = b64url_decode(sealed["enc"])
    dh = sk.exchange(X25519PublicKey.from_public_bytes(enc))
    eae_prk = labeled_extract(KEM_SUITE, b"", b"eae_prk", dh)
    shared_secret = labeled_expand(KEM_SUITE, eae_prk, b"shared_secret", enc + pk_r, 32)
    psk_id_hash = labeled_extract(HPKE_SUITE, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(HPKE_SUITE, b"", b"info_hash", INFO)
    context = b"\x00" + psk_id_hash + info_hash
    secret = labeled_extract(HPKE_SUITE, shared_secret, b"secret", b"")
    key = labeled_expand(HPKE_SUITE, secret, b"key", context, 32)
    nonce = labeled_expand(HPKE_SUITE, secret, b"base_nonce", context, 12)
    return AESGCM(key).decrypt(nonce, b64url_decode(sealed["ciphertext"]), additional_data(binding))


def main():
    if sys.argv[1] == "keygen":
        sk = X25519PrivateKey.generate()
        raw_private = sk.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption())
        raw_public = sk.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        print(json.dumps({"privateKey": raw_private.hex(), "publicKey": b64url_encode(raw_public)}))
    elif sys.argv[1] == "open":
        request = json.load(sys.stdin)
        print(json.dumps({"value": b64url_encode(open_sealed(request["privateKey"], request["sealed"], request["binding"]))}))


main()
