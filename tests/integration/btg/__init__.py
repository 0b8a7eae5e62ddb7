# SPDX-License-Identifier: MIT
"""Helpers of the integration tests, one module per subject (tests/README.md)."""
