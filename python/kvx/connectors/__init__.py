# SPDX-License-Identifier: Apache-2.0
"""Connectors shaped like inference engines' own KV-transfer classes (sglang)."""
