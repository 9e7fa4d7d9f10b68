//! Shared-memory layout of a fastpmi job segment (filled in by the segment issue).
