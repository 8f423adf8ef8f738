// Types of `oma-component/observability/file` (OMA's `@open-multi-agent/core/observability/file`):
// the Node-only FileTraceStore.

import type {
  AppendResult, DeleteResult, GetRunOptions, Page, RetentionPolicy, RunSummary, StoredRun, TraceDeleteQuery,
  TraceQuery, TraceRecord, TraceStore, TraceStoreDiagnostic,
} from './observability.js'

export declare const FILE_TRACE_STORE_FORMAT: 'oma.file_trace_store'
export declare const FILE_TRACE_STORE_FORMAT_VERSION: 1

export type FileTraceStoreErrorCode =
  | 'INVALID_PATH' | 'OPEN_FAILED' | 'READ_FAILED' | 'WRITE_FAILED' | 'SYNC_FAILED' | 'CLOSE_FAILED'
  | 'CORRUPT_FILE' | 'UNSUPPORTED_FILE_FORMAT' | 'UNSUPPORTED_TRACE_SCHEMA' | 'RECOVERY_FAILED'
  | 'STALE_COMPACTION_FILE' | 'RENAME_FAILED' | 'COMPACTION_FAILED' | 'CLOSED' | 'RECOVERY_REQUIRED'

/** The file store's lifecycle or file-system failure; never holds a record. */
export declare class FileTraceStoreError extends Error {
  readonly name: 'FileTraceStoreError'
  readonly code: FileTraceStoreErrorCode
  readonly operation?: string
  readonly path?: string
  readonly lineNumber?: number
  /** The `code` of the file-system error behind it (`EACCES`, ...). */
  readonly causeCode?: string
}

export type FileTraceStoreDiagnosticCode =
  | 'trailing_partial_line' | 'incomplete_batch' | 'stale_compaction_file' | 'directory_sync_unsupported'
  | 'minimal_permissions_not_enforced'

export interface FileTraceStoreDiagnostic {
  readonly code: FileTraceStoreDiagnosticCode
  readonly severity: 'warning'
  readonly message: string
  readonly lineNumber?: number
}

export interface FileTraceStoreOptions {
  /** The clock retention reads (milliseconds since the epoch). */
  readonly now?: () => number
  readonly onDiagnostic?: (diagnostic: FileTraceStoreDiagnostic | TraceStoreDiagnostic) => void
}

export interface FileTraceStoreCompactionResult {
  readonly recordsWritten: number
  readonly fileSizeBytes: number
}

/**
 * OMA's trace store in a durable NDJSON file (mode 0600), for one process and one instance at
 * a time: every mutation is written before it resolves, an interrupted write is cut off when
 * the file is opened, corruption is refused by line.
 */
export declare class FileTraceStore implements TraceStore {
  private constructor()
  static open(filePath: string, options?: FileTraceStoreOptions): Promise<FileTraceStore>
  readonly filePath: string
  readonly compactionTempPath: string
  getDiagnostics(): readonly FileTraceStoreDiagnostic[]
  append(records: readonly TraceRecord[]): Promise<AppendResult>
  getRun(runId: string, options?: GetRunOptions): Promise<StoredRun | null>
  queryRuns(query?: TraceQuery): Promise<Page<RunSummary>>
  deleteRun(runId: string): Promise<DeleteResult>
  delete(query: TraceDeleteQuery): Promise<DeleteResult>
  applyRetention(policy: RetentionPolicy): Promise<DeleteResult>
  /** Every record kept, by run in the order runs started (copies). */
  records(): TraceRecord[]
  /** fsyncs every write that completed before the call. */
  flush(): Promise<void>
  /** Rewrites the file with only the live records, through a temp file and an atomic rename. */
  compact(): Promise<FileTraceStoreCompactionResult>
  /** fsyncs and refuses later operations (`CLOSED`); idempotent. */
  close(): Promise<void>
}
