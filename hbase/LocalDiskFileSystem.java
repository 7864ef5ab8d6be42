import org.apache.hadoop.fs.LocalFileSystem;

/**
 * This machine's disk as HBase's file system (fs.file.impl in the hbase-site.xml that
 * hbase/launcher.py writes): Hadoop's LocalFileSystem, named as one service.
 *
 * A region server moves a bulk-loaded HFile into its region by renaming it only when the
 * file's file system and its own have the same service name, and copies it otherwise
 * (twice: into a staging directory, then into the region). LocalFileSystem has no such
 * name, so every file the ingest job wrote was copied twice on the same disk.
 */
public class LocalDiskFileSystem extends LocalFileSystem {
  @Override
  public String getCanonicalServiceName() {
    return "file:///";
  }
}
