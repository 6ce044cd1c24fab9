"""The record chain of a ledger store: tamper evidence for an append-only log (issue 25 §3).

A store that forgets spending understates privacy, so every append is linked to everything
before it, as transparency logs link their entries (Crosby & Wallach 2009, "Efficient Data
Structures for Tamper-Evident Logging"; a plain hash chain here, the simplest of their forms):

* the **genesis** hash covers the store's format, its budget and its labels (policy, arms) (an
  edited budget breaks every link after it);
* each **release** i (the interned release table) is linked: r_i = H(r_{i−1} ‖ json_i), r_{−1} =
  genesis — an edited release (which would change what earlier rows mean) breaks its link;
* each **batch** (one append: one transaction) is linked: c_s = H(c_{s−1} ‖ s ‖ n ‖ sha256(data)
  ‖ r_head ‖ n_releases), c_{−1} = genesis, where r_head and n_releases are the release chain's
  head and length when the batch was committed;
* the store keeps the last batch link (the **head**) and the numbers of batches and records
  beside it, written in the same transaction as the batch.

``verify`` recomputes every link and names the first that does not match (a deleted,
reordered, inserted or edited batch or release), and compares the head and counts with the last
batch (deleting the last batches leaves a head that no batch has).  An auditor who wrote down
(batches, head) earlier can check that the store only grew: the recomputed link at that batch
must equal the head written down (:func:`links`).

What a chain cannot do: it has no secret, so someone who edits the file *and* recomputes every
later link and the head cannot be caught by the file alone — only by a head held outside it
(the auditor's), which is why ``dpledger ledger head`` prints it.  H is SHA-256.
"""
from __future__ import annotations

import hashlib
import struct
from typing import Iterable, Iterator

GENESIS_TAG = b"dpledger-store chain v1\x00"


def genesis(budget_json: str | None, labels: str = "") -> bytes:
    """The chain's first link: the format tag, the budget (JSON text, or none) and the store's
    labels (the policy and number of arms it was made for, as JSON text; a store without labels
    has the same genesis as before they existed)."""
    tail = b"\x00" + labels.encode() if labels else b""
    return hashlib.sha256(GENESIS_TAG + (budget_json or "").encode() + tail).digest()


def release_link(prev: bytes, json_text: str) -> bytes:
    return hashlib.sha256(prev + json_text.encode()).digest()


def batch_link(prev: bytes, seq: int, n: int, data_sha256_hex: str, release_head: bytes,
               n_releases: int) -> bytes:
    return hashlib.sha256(prev + struct.pack("<qq", seq, n) + bytes.fromhex(data_sha256_hex)
                          + release_head + struct.pack("<q", n_releases)).digest()


def release_links(genesis_hash: bytes, texts: Iterable[str]) -> list[bytes]:
    """Every release's link, in id order."""
    out, prev = [], genesis_hash
    for text in texts:
        prev = release_link(prev, text)
        out.append(prev)
    return out


def links(genesis_hash: bytes, release_heads: list[bytes],
          batches: Iterable[tuple[int, int, str, int]]) -> Iterator[bytes]:
    """The link of every batch (seq, n, data sha256 hex, n_releases at its commit), in order;
    ``release_heads[i]`` is the link of release i (``genesis_hash`` for none)."""
    prev = genesis_hash
    for seq, n, sha, n_rel in batches:
        head = release_heads[n_rel - 1] if n_rel > 0 else genesis_hash
        prev = batch_link(prev, seq, n, sha, head, n_rel)
        yield prev
